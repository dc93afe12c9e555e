"""Headless Chromium for tests: find the system browser, drive it with Selenium.

Only a system-installed Chromium and its driver are used (Debian's
``chromium`` and ``chromium-driver``; ``scripts/install-test-deps.sh``
installs them); nothing is downloaded at test time. Tests that need a
browser use the ``browser`` fixture of ``tests/test_report_browser.py`` and
skip with :data:`SKIP_REASON` when none is available.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

__all__ = ["CHROME_FLAGS", "find_chromium", "find_chromedriver", "skip_reason", "chromium_driver", "console_errors"]

#: Flags every test browser runs with: headless, no sandbox (containers), no
#: background network traffic of its own.
CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    # the report must not need the network: make every host unresolvable
    "--host-resolver-rules=MAP * ~NOTFOUND",
)

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_DRIVERS = ("chromedriver",)
_DRIVER_PATHS = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver", "/usr/lib/chromium-browser/chromedriver")


def find_chromium() -> str | None:
    """Path of a system Chromium/Chrome, or ``None`` (``COLLSIM_CHROMIUM`` overrides)."""
    env = os.environ.get("COLLSIM_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for name in _BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def find_chromedriver() -> str | None:
    """Path of chromedriver, or ``None`` (``COLLSIM_CHROMEDRIVER`` overrides)."""
    env = os.environ.get("COLLSIM_CHROMEDRIVER")
    if env:
        return env if Path(env).exists() else None
    for name in _DRIVERS:
        path = shutil.which(name)
        if path:
            return path
    for path in _DRIVER_PATHS:
        if Path(path).exists():
            return path
    return None


def skip_reason() -> str | None:
    """Why browser tests cannot run here, or ``None`` when they can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if find_chromium() is None:
        return "no chromium on PATH (install Debian 'chromium' and 'chromium-driver': sh scripts/install-test-deps.sh)"
    if find_chromedriver() is None:
        return "no chromedriver found (install Debian 'chromium-driver': sh scripts/install-test-deps.sh)"
    return None


@contextmanager
def chromium_driver(width: int = 1440, height: int = 1000) -> Iterator[Any]:
    """A Selenium WebDriver for headless system Chromium, with console logging on."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="collsim-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = find_chromium()
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path keeps Selenium Manager from looking anything up.
    service = Service(executable_path=find_chromedriver())
    driver = webdriver.Chrome(service=service, options=options)
    try:
        driver.set_page_load_timeout(60)
        driver.set_script_timeout(30)
        yield driver
    finally:
        try:
            driver.quit()
        finally:
            shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver: Any) -> list[str]:
    """Console messages at level SEVERE since the last call (uncaught errors included)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
