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
