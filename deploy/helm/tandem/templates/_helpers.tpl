{{/* Names, labels and the pieces every tandem container shares. */}}

{{- define "tandem.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tandem.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tandem.labels" -}}
app.kubernetes.io/name: {{ include "tandem.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tandem
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* selectorLabels: pass (dict "ctx" $ "component" "worker") */}}
{{- define "tandem.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tandem.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tandem.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "tandem.collectorServiceAccount" -}}
{{- default (printf "%s-collector" (include "tandem.fullname" .)) .Values.collector.serviceAccountName -}}
{{- end -}}

{{- define "tandem.applierServiceAccount" -}}
{{- default (printf "%s-applier" (include "tandem.fullname" .)) .Values.applier.serviceAccountName -}}
{{- end -}}

{{- define "tandem.cluster" -}}
{{- $c := required "edge.cluster is required when edge.enabled is true: this cluster's name (the first part of its workload keys)" .Values.edge.cluster -}}
{{- if contains "/" $c -}}
{{- fail (printf "edge.cluster %q must not contain '/'" $c) -}}
{{- end -}}
{{- $c -}}
{{- end -}}

{{/* The environment every tandem process reads (docs/contract.md §7: TANDEM_<OPTION>). */}}
{{- define "tandem.env" -}}
- name: TANDEM_BROKER
  value: {{ .Values.broker | quote }}
- name: TANDEM_TOPIC_PREFIX
  value: {{ .Values.topicPrefix | quote }}
- name: TANDEM_PARTITIONS
  value: {{ .Values.partitions | quote }}
- name: TANDEM_REPLICATION
  value: {{ .Values.replication | quote }}
- name: TANDEM_METRICS_PORT
  value: {{ .Values.metrics.port | quote }}
{{- if .Values.config }}
- name: TANDEM_CONFIG
  value: /etc/tandem/config.yaml
{{- end }}
{{- end -}}

{{- define "tandem.configVolume" -}}
{{- if .Values.config }}
- name: config
  configMap:
    name: {{ include "tandem.fullname" . }}-config
{{- end }}
- name: tmp
  emptyDir: {}
{{- end -}}

{{- define "tandem.configMount" -}}
{{- if .Values.config }}
- name: config
  mountPath: /etc/tandem
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "tandem.podAnnotations" -}}
{{- if .ctx.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .ctx.Values.metrics.port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- if .ctx.Values.config }}
checksum/config: {{ toYaml .ctx.Values.config | sha256sum }}
{{- end }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* probes: pass (dict "ctx" $ "liveness" {...} "readiness" {...}) */}}
{{- define "tandem.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: metrics}
  {{- toYaml .liveness | nindent 2 }}
readinessProbe:
  httpGet: {path: /readyz, port: metrics}
  {{- toYaml .readiness | nindent 2 }}
{{- end -}}

{{/* Kafka security and record signing of one component (streams/security.py, streams/signing.py):
     pass (dict "ctx" $ "component" "worker"|"collector"|"applier"). Secrets are mounted as files,
     never put in the environment: TANDEM_SASL_PASSWORD_FILE, TANDEM_SSL_CERTFILE/KEYFILE and the
     key files point at them. */}}

{{/* "true" when the protocol encrypts (SSL, SASL_SSL): only then are the CA and the client
     certificate used (streams/security.py refuses TLS files with another protocol). A client
     certificate with a protocol without TLS is refused here already. */}}
{{- define "tandem.securityTls" -}}
{{- $s := .ctx.Values.kafkaSecurity -}}
{{- $u := index $s .component -}}
{{- $tls := has (upper (default "PLAINTEXT" $s.protocol)) (list "SSL" "SASL_SSL") -}}
{{- if and $u.certSecret (not $tls) -}}
{{- fail (printf "kafkaSecurity.%s.certSecret needs kafkaSecurity.protocol SSL or SASL_SSL (mutual TLS), not %s" .component (default "PLAINTEXT" $s.protocol)) -}}
{{- end -}}
{{- if $tls -}}true{{- end -}}
{{- end -}}
{{- define "tandem.securityUser" -}}
{{- $s := .ctx.Values.kafkaSecurity -}}
{{- $u := index $s .component -}}
{{- if $u.username -}}{{ $u.username }}{{- else if eq .component "worker" -}}worker{{- else -}}{{ printf "%s-%s" .component .ctx.Values.edge.cluster }}{{- end -}}
{{- end -}}

{{- define "tandem.securityEnv" -}}
{{- $s := .ctx.Values.kafkaSecurity -}}
{{- $sig := .ctx.Values.signing -}}
{{- $u := index $s .component -}}
{{- if and $s.protocol (ne $s.protocol "PLAINTEXT") }}
- name: TANDEM_SECURITY_PROTOCOL
  value: {{ $s.protocol | quote }}
{{- if include "tandem.securityTls" . }}
{{- if $s.caSecret }}
- name: TANDEM_SSL_CAFILE
  value: /etc/tandem/kafka-ca/ca.crt
{{- end }}
{{- if $u.certSecret }}
- name: TANDEM_SSL_CERTFILE
  value: /etc/tandem/kafka-client/tls.crt
- name: TANDEM_SSL_KEYFILE
  value: /etc/tandem/kafka-client/tls.key
{{- end }}
{{- end }}
{{- if hasPrefix "SASL" $s.protocol }}
- name: TANDEM_SASL_MECHANISM
  value: {{ $s.saslMechanism | quote }}
- name: TANDEM_SASL_USERNAME
  value: {{ include "tandem.securityUser" . | quote }}
- name: TANDEM_SASL_PASSWORD_FILE
  value: /etc/tandem/kafka-user/password
{{- end }}
{{- end }}
{{- with $s.actuatorClusters }}
- name: TANDEM_ACTUATOR_CLUSTERS
  value: {{ join "," . | quote }}
{{- end }}
{{- with $s.inputClusters }}
- name: TANDEM_INPUT_CLUSTERS
  value: {{ join "," . | quote }}
{{- end }}
{{- if and (eq .component "worker") $sig.inputKeysSecret }}
- name: TANDEM_INPUT_KEYS
  value: /etc/tandem/input-keys/keys
{{- end }}
{{- if and (eq .component "worker") $sig.decisionKeySecret }}
- name: TANDEM_DECISION_SIGNING_KEY
  value: /etc/tandem/decision-key/decision.key
- name: TANDEM_DECISION_TTL
  value: {{ $sig.decisionTtl | quote }}
{{- end }}
{{- if and (eq .component "collector") $sig.inputSigningKeySecret }}
- name: TANDEM_INPUT_SIGNING_KEYS
  value: /etc/tandem/input-keys/keys
{{- end }}
{{- if and (eq .component "applier") $sig.trustedDecisionKeysSecret }}
- name: TANDEM_TRUSTED_DECISION_KEYS
  value: /etc/tandem/decision-key/decision.pub
{{- end }}
{{- end -}}

{{/* [mount path, secret name] pairs of one component */}}
{{- define "tandem.securitySecrets" -}}
{{- $s := .ctx.Values.kafkaSecurity -}}
{{- $sig := .ctx.Values.signing -}}
{{- $u := index $s .component -}}
{{- $out := list -}}
{{- if include "tandem.securityTls" . -}}
{{- if $s.caSecret -}}{{- $out = append $out (list "kafka-ca" $s.caSecret) -}}{{- end -}}
{{- if $u.certSecret -}}{{- $out = append $out (list "kafka-client" $u.certSecret) -}}{{- end -}}
{{- end -}}
{{- if and (hasPrefix "SASL" (default "" $s.protocol)) -}}
{{- $pw := required (printf "kafkaSecurity.%s.passwordSecret is required with a SASL protocol" .component) $u.passwordSecret -}}
{{- $out = append $out (list "kafka-user" $pw) -}}
{{- end -}}
{{- if and (eq .component "worker") $sig.inputKeysSecret -}}{{- $out = append $out (list "input-keys" $sig.inputKeysSecret) -}}{{- end -}}
{{- if and (eq .component "worker") $sig.decisionKeySecret -}}{{- $out = append $out (list "decision-key" $sig.decisionKeySecret) -}}{{- end -}}
{{- if and (eq .component "collector") $sig.inputSigningKeySecret -}}{{- $out = append $out (list "input-keys" $sig.inputSigningKeySecret) -}}{{- end -}}
{{- if and (eq .component "applier") $sig.trustedDecisionKeysSecret -}}{{- $out = append $out (list "decision-key" $sig.trustedDecisionKeysSecret) -}}{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{- define "tandem.securityMounts" -}}
{{- range (include "tandem.securitySecrets" . | fromJsonArray) }}
- name: {{ index . 0 }}
  mountPath: /etc/tandem/{{ index . 0 }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "tandem.securityVolumes" -}}
{{- range (include "tandem.securitySecrets" . | fromJsonArray) }}
- name: {{ index . 0 }}
  secret:
    secretName: {{ index . 1 }}
    defaultMode: 0400
{{- end }}
{{- end -}}
