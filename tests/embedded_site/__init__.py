"""A site served by real uvicorn and gunicorn processes in embedded mode
(tests/integration/test_embedded.py)."""
