# Sourced by scripts/demo and scripts/test: find Python 3.11+ and make the project's .venv.
# Not meant to be run on its own.

# Print the command to run for a Python interpreter of version 3.11 or later (PYTHON overrides).
find_python() {
    local candidate
    for candidate in ${PYTHON:-} python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "error: Python 3.11 or later is needed (on Debian 12: apt-get install python3 python3-venv)" >&2
    return 1
}

# Create $VENV (REPO/.venv) unless it already holds a working interpreter.
ensure_venv() {
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import pip' >/dev/null 2>&1; then
        return 0
    fi
    local python
    python="$(find_python)"
    rm -rf "$VENV"
    if ! "$python" -m venv "$VENV" 2>/dev/null; then
        # Debian ships venv's pip bootstrap separately.
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "Installing Debian's python3-venv ..."
            apt_get update -qq
            apt_get install -y -qq python3-venv >/dev/null
            rm -rf "$VENV"
            "$python" -m venv "$VENV"
        else
            echo "error: '$python -m venv' failed; install your system's venv package (Debian: sudo apt-get install python3-venv)" >&2
            return 1
        fi
    fi
}

# apt-get, non-interactive, waiting for the dpkg lock (another apt-get or an unattended upgrade
# may hold it) for up to APT_LOCK_TIMEOUT seconds instead of failing at once.
apt_get() {
    DEBIAN_FRONTEND=noninteractive apt-get -o "DPkg::Lock::Timeout=${APT_LOCK_TIMEOUT:-600}" "$@"
}

# pip install into the venv, quietly unless something goes wrong.
venv_pip_install() {
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$VENV/bin/python" -m pip install --quiet "$@"
}

# Debian packages the test suite uses, each "package:the program it installs:what for". Missing
# ones are installed with apt-get when this runs as root (after saying so, and unless
# FDBQUEUE_TEST_NO_APT=1); otherwise a warning says how to install them.
SYSTEM_PACKAGES=(
    "chromium:/usr/bin/chromium:the browser tests"
    "redis-server:/usr/bin/redis-server:the bench's Redis reference tests"
)

install_system_packages() {
    local entry package program purpose missing=() purposes=()
    for entry in "${SYSTEM_PACKAGES[@]}"; do
        IFS=: read -r package program purpose <<<"$entry"
        if [ ! -x "$program" ]; then
            missing+=("$package")
            purposes+=("$package for $purpose")
        fi
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "${FDBQUEUE_TEST_NO_APT:-}" != 1 ]; then
        local joined
        joined="$(printf '%s; ' "${purposes[@]}")"
        echo "==> Running as root: installing Debian's ${missing[*]} with apt-get (${joined%; })."
        echo "    FDBQUEUE_TEST_NO_APT=1 ./scripts/test installs nothing outside .venv."
        apt_get update -qq
        apt_get install -y -qq "${missing[@]}" >/dev/null
    else
        for entry in "${purposes[@]}"; do
            echo "warning: Debian's ${entry} is not installed, so those tests will be skipped or fail;" \
                "install it with: sudo apt-get install ${entry%% *}" >&2
        done
    fi
}
