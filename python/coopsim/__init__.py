"""coopsim's Python package (docs/python.md): record PyTorch training steps as coopsim traces, run the
simulator, and plot its results."""
