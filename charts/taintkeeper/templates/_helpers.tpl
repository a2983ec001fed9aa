{{/*
What the templates share: the namespace, the image, the flags as arguments, and Go durations in
seconds (for templates/checks.yaml).
*/}}

{{/* The release's namespace (helm install -n NAMESPACE): every namespaced object goes there, and whatever
names it follows: the webhook's and the policy's skip of their own namespace, the certificate's names, the
Lease (and with it the controller's default --backfill-excluded-namespaces), the RBAC subjects. */}}
{{- define "taintkeeper.namespace" -}}{{ .Release.Namespace }}{{- end }}

{{/* By digest when one is given (the tag is then only a name for people), else by tag. */}}
{{- define "taintkeeper.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/* The flags each program takes from values, in the order they are passed (those manifests/ passes
first, as it lists them); values.schema.json lists the same names. */}}
{{- define "taintkeeper.controllerFlagNames" -}}
log-format log-level node-monitor-period node-monitor-grace-period node-startup-grace-period
node-eviction-rate secondary-node-eviction-rate large-cluster-size-threshold unhealthy-zone-threshold
mark-pods-not-ready-on-transition-only taint-eviction-workers respect-disruption-budgets-for-taints
disruption-budget-timeout backfill-default-tolerations backfill-excluded-namespaces backfill-rate
default-not-ready-toleration-seconds default-unreachable-toleration-seconds auto-fence-after controllers
dry-run feature-gates leader-elect-lease-duration leader-elect-renew-deadline leader-elect-retry-period
authentication-token-webhook-cache-ttl authorization-webhook-cache-authorized-ttl
authorization-webhook-cache-unauthorized-ttl authorization-always-allow-paths
{{- end }}

{{- define "taintkeeper.webhookFlagNames" -}}
workers log-format log-level default-not-ready-toleration-seconds default-unreachable-toleration-seconds
replace-builtin-defaults builtin-default-seconds namespace-cache worker-class threads request-timeout
keepalive-timeout max-connections max-request-bytes fast-paths authentication-token-webhook-cache-ttl
authorization-webhook-cache-authorized-ttl authorization-webhook-cache-unauthorized-ttl
authorization-always-allow-paths
{{- end }}

{{/* One flag's value as its program reads it. Numbers from values files arrive as floats: whole ones are
written as integers (7340032, not 7.340032e+06). */}}
{{- define "taintkeeper.flagValue" -}}
{{- if and (kindIs "float64" .) (eq . (floor .)) -}}{{ int64 . }}{{- else -}}{{ . }}{{- end -}}
{{- end }}

{{/* The container's args for a flags map: dict "flags" MAP "names" ORDERED-NAMES "where" VALUES-PATH.
A name no program has stops the render (the schema refuses it first, unless it is skipped). */}}
{{- define "taintkeeper.flagArgs" -}}
{{- $names := splitList " " (.names | replace "\n" " ") -}}
{{- range $name, $_ := .flags }}
{{- if not (has $name $names) }}
{{- fail (printf "%s.%s: unknown flag (known: %s)" $.where $name (join ", " $names)) }}
{{- end }}
{{- end }}
{{- range $names }}
{{- if hasKey $.flags . }}
- {{ printf "--%s=%s" . (include "taintkeeper.flagValue" (get $.flags .)) | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* A Go duration (5s, 1m30s, 300ms; the schema checked its form) in seconds. */}}
{{- define "taintkeeper.seconds" -}}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "μs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "(\\d+(\\.\\d*)?|\\.\\d+)(ns|us|µs|μs|ms|s|m|h)" (toString .) -1 -}}
{{- $number := regexFind "^[0-9.]+" . -}}
{{- $total = addf $total (mulf (float64 $number) (get $units (trimPrefix $number .))) -}}
{{- end -}}
{{- $total -}}
{{- end }}

{{/* The certificate Job of this release revision (templates/certs-sync.yaml says why it is per revision). */}}
{{- define "taintkeeper.certsJob" -}}
taintkeeper-certs-sync-{{ .Release.Revision }}
{{- end }}

{{/* Who adds the default tolerations: "webhook" or "policy" (admission.mode; auto: the policy where the
cluster serves MutatingAdmissionPolicy v1, 1.36+). The policy where it is not served stops the render. */}}
{{- define "taintkeeper.admission" -}}
{{- $served := .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}
{{- if eq .Values.admission.mode "auto" -}}
{{- ternary "policy" "webhook" $served -}}
{{- else if and (eq .Values.admission.mode "policy") (not $served) -}}
{{- fail (printf "admission.mode=policy needs MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes 1.36+), which the cluster (Kubernetes %s, as Helm sees it) does not serve: use admission.mode=webhook or auto (helm template: --api-versions admissionregistration.k8s.io/v1/MutatingAdmissionPolicy)" .Capabilities.KubeVersion.Version) -}}
{{- else -}}
{{- .Values.admission.mode -}}
{{- end -}}
{{- end }}
