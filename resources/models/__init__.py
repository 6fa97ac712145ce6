"""Sample ONNX models and make_models.py, the PyTorch source they are exported from."""
