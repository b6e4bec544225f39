"""Task modules that misbehave on import, for the trust tests."""
