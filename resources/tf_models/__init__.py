"""Sample TensorFlow models and make_tf_models.py, the Keras source they are generated from."""
