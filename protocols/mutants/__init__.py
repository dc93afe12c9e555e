"""Deliberately broken protocol variants: each declares the property the verifier must find violated."""
