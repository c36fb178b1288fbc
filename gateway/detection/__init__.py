"""Faces from pixels: each model's preprocessing and decoder, suppression and fusion of their faces."""
