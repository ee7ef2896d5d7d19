"""Sharing a trained policy on the Hugging Face Hub: ``border push`` and ``border pull``.

``border push`` builds, in a fresh folder, exactly what it uploads (:mod:`.folder`): the model
card (:mod:`.card`), the policy's checkpoint without its training state, the policy exported for
use without border-py, the run's learning curve, a replay video when the env renders, and the
results of a fresh evaluation (:mod:`.score`) on reset seeds none of the run's own evaluations
played. ``border pull`` keeps of a download only what ``border push`` writes (:mod:`.contents`),
in a dir no ``import`` can take for a module. The Hub is reached through ``huggingface_hub``
(the ``hub`` extra) in :mod:`.remote` only, behind functions that take the API object or the
download function, so that everything else runs and is tested without a network.
"""

__all__: list[str] = []
