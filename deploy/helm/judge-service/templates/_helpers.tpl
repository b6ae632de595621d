{{/* Names: the usual Helm scheme, 63 characters at most (a DNS label). */}}
{{- define "judge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "judge.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* A component's name: "<fullname>-<component>", the suffix kept whole. */}}
{{- define "judge.componentName" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- printf "%s-%s" (include "judge.fullname" $root | trunc (int (sub 62 (len $component))) | trimSuffix "-") $component }}
{{- end }}

{{- define "judge.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "judge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: judge-service
{{- end }}

{{/* Selector labels of one component (api, worker, redis): call with (list . "api"). */}}
{{- define "judge.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "judge.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "judge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "judge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "judge.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "judge.configName" -}}{{ include "judge.componentName" (list . "config") }}{{- end }}
{{- define "judge.redisName" -}}{{ include "judge.componentName" (list . "redis") }}{{- end }}
{{- define "judge.workerName" -}}{{ include "judge.componentName" (list . "worker") }}{{- end }}

{{/* The Secret of provider and API keys: the user's, or the chart's. */}}
{{- define "judge.keysSecretName" -}}
{{- default (include "judge.componentName" (list . "keys")) .Values.secrets.existingSecret }}
{{- end }}

{{/* The chart's Secret of the Redis URL (and of the chart's Redis password). */}}
{{- define "judge.redisSecretName" -}}{{ include "judge.componentName" (list . "redis-auth") }}{{- end }}

{{/* One Redis, exactly: the chart's or an external one. */}}
{{- define "judge.checkRedis" -}}
{{- $ext := .Values.redis.external }}
{{- $given := 0 }}
{{- if $ext.url }}{{ $given = add1 $given }}{{ end }}
{{- if $ext.existingSecret }}{{ $given = add1 $given }}{{ end }}
{{- if and .Values.redis.internal.enabled (gt $given 0) }}
{{- fail "redis: set redis.internal.enabled=false to use redis.external" }}
{{- end }}
{{- if and (not .Values.redis.internal.enabled) (ne $given 1) }}
{{- fail "redis: with redis.internal.enabled=false, set exactly one of redis.external.url and redis.external.existingSecret" }}
{{- end }}
{{- if and $ext.passwordSecret.name (not $ext.url) }}
{{- fail "redis.external.passwordSecret is spliced into redis.external.url, which is empty" }}
{{- end }}
{{- end }}

{{/*
The Redis password, where the chart knows one, as a secretKeyRef ({name, key}); empty
otherwise. KEDA's explicit one wins, then the external one, then the chart's Redis's.
*/}}
{{- define "judge.redisPasswordRef" -}}
{{- $keda := .Values.keda.redis.passwordSecret }}
{{- $ext := .Values.redis.external.passwordSecret }}
{{- if and $keda.name $keda.key }}
{{- toYaml (dict "name" $keda.name "key" $keda.key) }}
{{- else if and (not .Values.redis.internal.enabled) $ext.name }}
{{- toYaml (dict "name" $ext.name "key" $ext.key) }}
{{- else if and .Values.redis.internal.enabled .Values.redis.internal.password }}
{{- toYaml (dict "name" (include "judge.redisSecretName" .) "key" "redis-password") }}
{{- end }}
{{- end }}

{{/* Environment of the API and the workers: Redis and the keys, all from Secrets. */}}
{{- define "judge.secretEnv" -}}
{{- $ext := .Values.redis.external }}
{{- if $ext.existingSecret }}
- name: JUDGE_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $ext.existingSecret }}
      key: {{ $ext.existingSecretKey }}
{{- else if and (not .Values.redis.internal.enabled) $ext.passwordSecret.name }}
# Kubernetes expands $(REDIS_PASSWORD) from the variable defined just before it.
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $ext.passwordSecret.name }}
      key: {{ $ext.passwordSecret.key }}
- name: JUDGE_REDIS_URL
  value: {{ regexReplaceAll "^([A-Za-z0-9+.-]+)://" $ext.url "${1}://:$(REDIS_PASSWORD)@" | quote }}
{{- else }}
- name: JUDGE_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "judge.redisSecretName" . }}
      key: redis-url
{{- end }}
{{- range .Values.secrets.providerKeys }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ include "judge.keysSecretName" $ }}
      key: {{ . }}
      optional: true
{{- end }}
- name: JUDGE_API_KEYS
  valueFrom:
    secretKeyRef:
      name: {{ include "judge.keysSecretName" . }}
      key: JUDGE_API_KEYS
      optional: {{ not .Values.secrets.requireApiKeys }}
{{- end }}

{{/* The container securityContext: the values', capabilities owned here. */}}
{{- define "judge.securityContext" -}}
{{- $caps := dict "drop" (list "ALL") }}
{{- if .Values.sandbox.capSysAdmin }}
{{- $_ := set $caps "add" (list "SYS_ADMIN") }}
{{- end }}
{{- toYaml (merge (dict "capabilities" $caps) (deepCopy .Values.securityContext)) }}
{{- end }}

{{/* Pod placement shared by the API and the workers: call with (list . "api" .Values.api). */}}
{{- define "judge.placement" -}}
{{- $root := index . 0 }}
{{- $values := index . 2 -}}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $root.Values.topologySpread.enabled }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: {{ $root.Values.topologySpread.topologyKey }}
    whenUnsatisfiable: {{ $root.Values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "judge.selectorLabels" (list $root (index . 1)) | nindent 8 }}
{{- end }}
{{- end }}

{{/* Roll the pods when their settings or the chart's Secrets change. */}}
{{- define "judge.checksums" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secrets: {{ include (print .Template.BasePath "/secrets.yaml") . | sha256sum }}
{{- end }}
