"""End-to-end tests in JupyterLab and Chromium (pytest -m browser)."""
