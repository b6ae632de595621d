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
redis.external.url in parts, for KEDA (which never reads a URL): scheme, username,
password, hasPassword, hosts (host:port, the default port added), path segments and
query. Whatever KEDA could not be given the same as the workers fails the render, naming
the value: a percent-encoded credential (Helm cannot decode it), a unix socket.
*/}}
{{- define "judge.urlParts" -}}
{{- $url := .Values.redis.external.url }}
{{- $re := `^([A-Za-z][A-Za-z0-9+.-]*)://(([^:@/?#]*)(:([^@/?#]*))?@)?([^@/?#]*)(/[^?#]*)?(\?([^#]*))?$` }}
{{- if not (regexMatch $re $url) }}
{{- fail "redis.external.url: KEDA (keda.enabled) cannot read this URL: it must be scheme://[[user]:password@]host[:port][,host[:port]...][/path][?query]" }}
{{- end }}
{{- $scheme := lower (regexReplaceAll $re $url "${1}") }}
{{- if eq $scheme "unix" }}
{{- fail "redis.external.url: KEDA (keda.enabled) cannot reach Redis over a unix socket; give a redis:// URL" }}
{{- end }}
{{- $sentinel := hasSuffix "+sentinel" $scheme }}
{{- $port := ternary "26379" "6379" $sentinel }}
{{- $hosts := list }}
{{- range (splitList "," (regexReplaceAll $re $url "${6}")) }}
{{- if not . }}
{{- fail "redis.external.url: KEDA (keda.enabled) needs every host of the URL named" }}
{{- end }}
{{- $hosts = append $hosts (ternary . (printf "%s:%s" . $port) (regexMatch `:[0-9]+$` .)) }}
{{- end }}
{{- $query := dict }}
{{- range (splitList "&" (regexReplaceAll $re $url "${9}")) }}
{{- if . }}
{{- $kv := splitn "=" 2 . }}
{{- $_ := set $query $kv._0 (default "" $kv._1) }}
{{- end }}
{{- end }}
{{- $username := regexReplaceAll $re $url "${3}" }}
{{- $password := regexReplaceAll $re $url "${5}" }}
{{- range (list $username $password (get $query "sentinel_password") (get $query "sentinel_username")) }}
{{- if contains "%" . }}
{{- fail "redis.external.url: a percent-encoded user or password cannot be handed to KEDA (Helm has no URL decoding); put the password in redis.external.passwordSecret, or the URL in redis.external.existingSecret with keda.redis.passwordSecret" }}
{{- end }}
{{- end }}
{{- $path := list }}
{{- range (splitList "/" (regexReplaceAll $re $url "${7}")) }}{{ if . }}{{ $path = append $path . }}{{ end }}{{ end }}
{{- toYaml (dict "scheme" $scheme "sentinel" $sentinel "username" $username "password" $password "hasPassword" (ne (regexReplaceAll $re $url "${4}") "") "hosts" $hosts "path" $path "query" $query) }}
{{- end }}

{{/*
How KEDA reaches the workers' Redis, as a dict (toYaml): type, addresses, databaseIndex,
sentinelMaster, enableTLS, unsafeSsl, username, sentinelUsername, and the secrets as
Secret refs ({name, key}) password and sentinelPassword. From the chart's Redis; from
redis.external.url, parsed here (the URL's passwords go to the chart's Secret, keys
redis-password and redis-sentinel-password); or, where the URL is in a Secret the chart
cannot read, from keda.redis. deploy/check.py compares the result with the workers' URL.
*/}}
{{- define "judge.kedaConnection" -}}
{{- $conn := .Values.keda.redis }}
{{- $ext := .Values.redis.external }}
{{- $secret := include "judge.redisSecretName" . }}
{{- $out := dict "type" "redis-streams" "databaseIndex" 0 "sentinelMaster" "" "enableTLS" false "unsafeSsl" false "username" "" "sentinelUsername" "" }}
{{- if or .Values.redis.internal.enabled $ext.url }}
{{- range $name := list "addresses" "sentinelMaster" "databaseIndex" "enableTLS" }}
{{- if index $conn $name }}
{{- fail (printf "keda.redis.%s: KEDA's connection is read from the chart's Redis or redis.external.url; set keda.redis only with redis.external.existingSecret" $name) }}
{{- end }}
{{- end }}
{{- range $name := list "passwordSecret" "sentinelPasswordSecret" }}
{{- if (index $conn $name).name }}
{{- fail (printf "keda.redis.%s: KEDA's passwords come from the chart's Redis or redis.external.url (or redis.external.passwordSecret); set keda.redis only with redis.external.existingSecret" $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.redis.internal.enabled }}
{{- $_ := set $out "addresses" (printf "%s.%s.svc.%s:6379" (include "judge.redisName" .) .Release.Namespace .Values.clusterDomain) }}
{{- if .Values.redis.internal.password }}
{{- $_ := set $out "password" (dict "name" $secret "key" "redis-password") }}
{{- end }}
{{- else if $ext.url }}
{{- $url := include "judge.urlParts" . | fromYaml }}
{{- if eq $url.scheme "rediss+sentinel" }}
{{- fail "redis.external.url: rediss+sentinel:// is TLS to the primary only, and KEDA's Sentinel scaler has one TLS setting for the sentinels and the primary alike (go-redis FailoverOptions.TLSConfig): KEDA cannot read this Redis; use redis+sentinel://, or turn keda.enabled off" }}
{{- end }}
{{- if $url.sentinel }}
{{- if or (lt (len $url.path) 1) (gt (len $url.path) 2) }}
{{- fail "redis.external.url: a Sentinel URL's path is /service or /service/db" }}
{{- end }}
{{- $_ := set $out "type" "redis-sentinel-streams" }}
{{- $_ := set $out "sentinelMaster" (index $url.path 0) }}
{{- if eq (len $url.path) 2 }}{{ $_ := set $out "databaseIndex" (index $url.path 1) }}{{ end }}
{{- $_ := set $out "sentinelUsername" (get $url.query "sentinel_username") }}
{{- if get $url.query "sentinel_password" }}
{{- $_ := set $out "sentinelPassword" (dict "name" $secret "key" "redis-sentinel-password") }}
{{- end }}
{{- else }}
{{- if gt (len $url.hosts) 1 }}
{{- fail "redis.external.url: more than one host outside a Sentinel URL" }}
{{- end }}
{{- if hasKey $url.query "db" }}
{{- fail "redis.external.url: KEDA (keda.enabled) reads the database from the URL's path (/N), not from ?db=" }}
{{- end }}
{{- if $url.path }}{{ $_ := set $out "databaseIndex" (index $url.path 0) }}{{ end }}
{{- $_ := set $out "enableTLS" (eq $url.scheme "rediss") }}
{{- $_ := set $out "unsafeSsl" (eq (lower (get $url.query "ssl_cert_reqs")) "none") }}
{{- end }}
{{- if not (regexMatch `^[0-9]+$` (toString $out.databaseIndex)) }}
{{- fail (printf "redis.external.url: the database %q is not a number" (toString $out.databaseIndex)) }}
{{- end }}
{{- $_ := set $out "addresses" (join "," $url.hosts) }}
{{- $_ := set $out "username" $url.username }}
{{- if $ext.passwordSecret.name }}
{{- $_ := set $out "password" (dict "name" $ext.passwordSecret.name "key" $ext.passwordSecret.key) }}
{{- else if $url.hasPassword }}
{{- $_ := set $out "password" (dict "name" $secret "key" "redis-password") }}
{{- end }}
{{- else }}
{{- if not $conn.addresses }}
{{- fail "keda.redis.addresses: with the URL in redis.external.existingSecret KEDA needs Redis's host:port (the sentinels', comma-separated, for Sentinel)" }}
{{- end }}
{{- if and (not $conn.sentinelMaster) (contains "," $conn.addresses) }}
{{- fail "keda.redis.addresses: one host:port without keda.redis.sentinelMaster (KEDA's redis-streams scaler reads only the first)" }}
{{- end }}
{{- $_ := set $out "type" (ternary "redis-sentinel-streams" "redis-streams" (ne $conn.sentinelMaster "")) }}
{{- $_ := set $out "addresses" $conn.addresses }}
{{- $_ := set $out "sentinelMaster" $conn.sentinelMaster }}
{{- $_ := set $out "databaseIndex" $conn.databaseIndex }}
{{- $_ := set $out "enableTLS" $conn.enableTLS }}
{{- with $conn.passwordSecret }}{{ if .name }}{{ $_ := set $out "password" (dict "name" .name "key" .key) }}{{ end }}{{ end }}
{{- with $conn.sentinelPasswordSecret }}{{ if .name }}{{ $_ := set $out "sentinelPassword" (dict "name" .name "key" .key) }}{{ end }}{{ end }}
{{- end }}
{{- toYaml $out }}
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

{{/* The writable paths of a read-only root (writablePaths): the mounts, then the volumes. */}}
{{- define "judge.writableMounts" -}}
{{- range $name, $path := .Values.writablePaths }}
- name: {{ $name }}
  mountPath: {{ $path.mountPath }}
{{- end }}
{{- end }}

{{- define "judge.writableVolumes" -}}
{{- range $name, $path := .Values.writablePaths }}
- name: {{ $name }}
  emptyDir:
    {{- with $path.sizeLimit }}
    sizeLimit: {{ . }}
    {{- else }} {}
    {{- end }}
{{- end }}
{{- end }}
