"""ALBERT layers and models (keras.ops only)."""
