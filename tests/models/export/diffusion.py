"""Diffusion-transformer fixtures."""
FIXTURES = {}
