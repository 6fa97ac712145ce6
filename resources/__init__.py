"""Data shipped with Schedule Explorer (trained cost models, sample ONNX models): a package
so that a wheel installs it and engine/resources.py finds it with importlib.resources."""
