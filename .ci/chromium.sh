# Installs (if needed) Debian's chromium for the status page's browser
# test (coordinator/web TestBrowser, through chromedp). Sourced by
# .ci/run; a developer can source it too:
#
#   . .ci/chromium.sh && install_chromium
#
# The browser runs headless with no sandbox, as root in a container
# without systemd; nothing here starts a service.

install_chromium() {
	if command -v chromium >/dev/null 2>&1; then
		return 0
	fi
	export DEBIAN_FRONTEND=noninteractive
	local sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq || return 1
	$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null || return 1
	command -v chromium >/dev/null 2>&1 || { echo "chromium: installed, but not on PATH" >&2; return 1; }
	echo "chromium: $(chromium --version 2>/dev/null || echo installed)"
}
