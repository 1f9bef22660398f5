# Installs (if needed) the stock clients of the fail-over matrix (`make
# interop`, docs/FAILOVER.md) that come from Debian's packages: librdkafka
# through python3-confluent-kafka, and python3-kafka, both for Debian's
# /usr/bin/python3; and Node.js with npm if the machine has none (the Node
# drivers' packages come from their lock file, with `npm ci`, in `make
# interop`). Sourced by .ci/run; a developer can source it too:
#
#   . .ci/interop.sh && install_interop_clients

install_interop_clients() {
	local want=()
	/usr/bin/python3 -c 'import confluent_kafka' 2>/dev/null || want+=(python3-confluent-kafka)
	/usr/bin/python3 -c 'import kafka' 2>/dev/null || want+=(python3-kafka)
	command -v node >/dev/null 2>&1 || want+=(nodejs)
	command -v npm >/dev/null 2>&1 || want+=(npm)
	# --- SASL logins (TestSASLLogins): Debian's kcat, on librdkafka 2.0.2
	command -v kcat >/dev/null 2>&1 || want+=(kcat)
	if [ ${#want[@]} -gt 0 ]; then
		export DEBIAN_FRONTEND=noninteractive
		local sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		$sudo apt-get update -qq || return 1
		$sudo apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null || return 1
	fi
	echo "interop clients: librdkafka $(/usr/bin/python3 -c 'import confluent_kafka; print(confluent_kafka.libversion()[0])'), kafka-python $(/usr/bin/python3 -c 'import kafka; print(kafka.__version__)'), node $(node --version), npm $(npm --version)"
}
