"""Hydra configs of tiny_rl: ``border train hydra.searchpath=[pkg://tiny_rl.conf] agent=tiny_q``."""
