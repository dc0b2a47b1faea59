#!/usr/bin/env bash
# The Kafka ACLs of a tandem installation: what each principal may do, per cluster (docs/operating.md).
#
# Usage:
#   scripts/kafka-acls.sh --bootstrap-server HOST:PORT --command-config FILE --clusters a,b [options]
#
#   --prefix P             topic prefix (default tandem.; TANDEM_TOPIC_PREFIX)
#   --worker NAME          the worker's user (default worker): principal User:NAME
#   --app-id ID            the worker's consumer group (default <prefix>worker; TANDEM_APP_ID)
#   --clusters a,b         one collector (User:collector-<c>) and one applier (User:applier-<c>) per cluster
#   --input-clusters a,b   the clusters with input topics of their own (the worker's --input-clusters;
#                          TANDEM_INPUT_CLUSTERS): their collectors write those five topics and no other
#   --publisher NAME       also a user that may write every input topic (tandem publish), the shared
#                          ones and those of the --input-clusters
#   --auditor NAME         also a user that may read the audit topic (tandem audit --broker)
#   --dry-run              print the kafka-acls commands instead of running them
#
# What it grants (and nothing else: the broker runs with allow.everyone.if.no.acl.found=false):
#   worker        Read, Write, Create, Describe, DescribeConfigs on topics prefixed P (inputs, outputs,
#                 P actuator.<cluster>, and Faust's changelog/assignor topics, which start with its app id);
#                 Read, Describe on its consumer group
#   collector-c   Write, Describe on P{metrics,workloads,hpa,vpa,policies} and P deadletter (the policy
#                 objects it refuses): it can write inputs, read nothing; the worker refuses its records
#                 for another cluster (streams/signing.py).  For c in --input-clusters, on its own five
#                 topics P{metrics,...,policies}.c instead of the shared ones, so that no other collector
#                 can write (nor compact away) what the worker rebuilds c from.  Literal ACLs, one per
#                 topic: a prefixed ACL on P metrics.eu-1 would also grant P metrics.eu-10.
#   applier-c     Read, Describe on P actuator.<c> (the worker must run with --actuator-clusters naming c)
#                 and on its group tandem-applier-<c>; Write, Describe on P audit (its results)
#
# The command-config file holds the admin client's security settings, e.g. for SASL_SSL + SCRAM:
#   security.protocol=SASL_SSL
#   sasl.mechanism=SCRAM-SHA-512
#   sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="...";
#   ssl.truststore.type=PEM
#   ssl.truststore.location=/path/to/ca.pem
#
# kafka-acls: `kafka-acls.sh` from PATH when there is one, else Kafka's AclCommand from the jars that
# scripts/kafka.sh fetches (java needed).
set -euo pipefail

prefix="${TANDEM_TOPIC_PREFIX:-tandem.}"
worker="worker"
app_id="${TANDEM_APP_ID:-}"
clusters=""
input_clusters="${TANDEM_INPUT_CLUSTERS:-}"
publisher=""
auditor=""
bootstrap=""
config=""
dry_run=0

die() { printf 'kafka-acls.sh: error: %s\n' "$*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --bootstrap-server) bootstrap="${2:?}"; shift 2 ;;
        --command-config) config="${2:?}"; shift 2 ;;
        --prefix) prefix="${2?}"; shift 2 ;;
        --worker) worker="${2:?}"; shift 2 ;;
        --app-id) app_id="${2:?}"; shift 2 ;;
        --clusters) clusters="${2:?}"; shift 2 ;;
        --input-clusters) input_clusters="${2?}"; shift 2 ;;
        --publisher) publisher="${2:?}"; shift 2 ;;
        --auditor) auditor="${2:?}"; shift 2 ;;
        --dry-run) dry_run=1; shift ;;
        -h | --help) usage ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
[[ -n "$bootstrap" ]] || die "--bootstrap-server is required"
[[ -n "$config" || $dry_run -eq 1 ]] || die "--command-config is required"
[[ -z "$config" || -f "$config" ]] || die "no such command config: $config"
app_id="${app_id:-${prefix}worker}"

acls_cmd=()
if command -v kafka-acls.sh >/dev/null; then
    acls_cmd=(kafka-acls.sh)
else
    libs="${TANDEM_CACHE:-$HOME/.cache/tandem}/kafka-${TANDEM_KAFKA_VERSION:-3.9.2}/libs"
    [[ $dry_run -eq 1 || -d "$libs" ]] || die "no kafka-acls.sh on PATH and no Kafka jars in $libs (run scripts/kafka.sh fetch)"
    acls_cmd=(java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$libs/*" kafka.admin.AclCommand)
fi

acl() {  # PRINCIPAL-NAME OPERATIONS(comma) RESOURCE-ARGS...
    local user="$1" ops="$2"; shift 2
    local args=(--bootstrap-server "$bootstrap" --add --force --allow-principal "User:$user")
    [[ -n "$config" ]] && args+=(--command-config "$config")
    local op
    for op in ${ops//,/ }; do args+=(--operation "$op"); done
    args+=("$@")
    if [[ $dry_run -eq 1 ]]; then
        printf 'kafka-acls.sh'; printf ' %q' "${args[@]}"; printf '\n'
    else
        "${acls_cmd[@]}" "${args[@]}" >/dev/null || die "kafka-acls failed for User:$user $ops $*"
        printf 'granted User:%s %s on %s\n' "$user" "$ops" "$*"
    fi
}

inputs=()
for s in metrics workloads hpa vpa policies; do inputs+=(--topic "${prefix}${s}"); done

# A cluster's own input topics: Kafka takes [a-zA-Z0-9._-] in a topic name (as tandem's --input-clusters).
own_inputs() {  # CLUSTER -> the --topic arguments of its five topics
    local c="$1" s
    for s in metrics workloads hpa vpa policies; do printf -- '--topic\n%s\n' "${prefix}${s}.${c}"; done
}
IFS=',' read -r -a input_list <<<"$input_clusters"
declare -A own=()
all_own=()
for c in "${input_list[@]}"; do
    [[ -n "$c" ]] || continue
    [[ "$c" =~ ^[A-Za-z0-9._-]+$ ]] || die "--input-clusters: $c cannot be part of a Kafka topic name"
    own[$c]=1
    mapfile -t more < <(own_inputs "$c")
    all_own+=("${more[@]}")
done

acl "$worker" Read,Write,Create,Describe,DescribeConfigs --topic "$prefix" --resource-pattern-type prefixed
acl "$worker" Read,Describe --group "$app_id"

IFS=',' read -r -a cluster_list <<<"$clusters"
for c in "${cluster_list[@]}"; do
    [[ -n "$c" ]] || continue
    [[ "$c" != */* && "$c" != *" "* ]] || die "not a cluster name: $c"
    if [[ -n "${own[$c]:-}" ]]; then
        mapfile -t mine < <(own_inputs "$c")
        acl "collector-$c" Write,Describe "${mine[@]}" --topic "${prefix}deadletter"
    else
        acl "collector-$c" Write,Describe "${inputs[@]}" --topic "${prefix}deadletter"
    fi
    acl "applier-$c" Read,Describe --topic "${prefix}actuator.$c"
    acl "applier-$c" Read,Describe --group "tandem-applier-$c"
    acl "applier-$c" Write,Describe --topic "${prefix}audit"
done
if [[ -n "$publisher" ]]; then acl "$publisher" Write,Describe "${inputs[@]}" "${all_own[@]}"; fi
if [[ -n "$auditor" ]]; then acl "$auditor" Read,Describe --topic "${prefix}audit"; fi
