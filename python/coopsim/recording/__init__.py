"""Modules of scripts/record_pytorch.py: PyTorch training steps -> coopsim trace v1 (docs/recording.md)."""
