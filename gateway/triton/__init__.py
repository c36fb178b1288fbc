"""Talking to Triton: the gRPC client, shared-memory regions and the tensors on the wire."""
