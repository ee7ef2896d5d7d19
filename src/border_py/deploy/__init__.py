"""Using a trained policy outside training: :func:`~border_py.deploy.load.load_policy` (a run's
policy, ready to ``predict``) and :func:`~border_py.deploy.export.export_policy` (ONNX,
TorchScript, or numpy alone)."""

__all__: list[str] = []
