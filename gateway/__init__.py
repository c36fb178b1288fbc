"""facecrop gateway: decode -> preprocess -> infer (Triton) -> postprocess -> crop -> encode."""
