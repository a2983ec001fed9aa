{{/* NOTES.txt: what to do next after an install or upgrade. A define, so tests/chart/ can render it with
`helm template` (which leaves NOTES.txt out). */}}
{{- define "taintkeeper.notes" -}}
{{- $ns := include "taintkeeper.namespace" . -}}
{{- $flags := .Values.webhook.flags -}}
{{- $notReady := ternary (get $flags "default-not-ready-toleration-seconds") 300 (hasKey $flags "default-not-ready-toleration-seconds") -}}
{{- $unreachable := ternary (get $flags "default-unreachable-toleration-seconds") 300 (hasKey $flags "default-unreachable-toleration-seconds") -}}
taintkeeper {{ .Chart.AppVersion }} ({{ include "taintkeeper.image" . }}) is installed in the namespace {{ $ns }}.
{{- if not .Values.namespace.create }}
{{- /* What the namespace was when Helm rendered this: absent when --create-namespace made it after. */}}
{{- $namespace := lookup "v1" "Namespace" "" $ns }}
{{- $labels := dig "metadata" "labels" dict $namespace }}
{{- if ne (get $labels "pod-security.kubernetes.io/enforce") "restricted" }}

0. The namespace {{ $ns }} does not enforce the restricted Pod Security Standard: it has no label
   pod-security.kubernetes.io/enforce=restricted{{ if not $namespace }} (Helm made it, with --create-namespace,
   or could not read it){{ end }}. taintkeeper's pods meet that standard; give the namespace what
   taintkeeper's own namespace carries (docs/operating.md, "Installing with Helm"):

     kubectl label namespace {{ $ns }} pod-security.kubernetes.io/enforce=restricted \
       pod-security.kubernetes.io/enforce-version=latest taintkeeper.io/skip=true app.kubernetes.io/part-of=taintkeeper
     kubectl annotate namespace {{ $ns }} taintkeeper.io/eviction=respect-disruption-budget
{{ end }}
{{- end }}

{{- if eq (include "taintkeeper.admission" .) "policy" }}
1. Wait until it is up:

     kubectl -n {{ $ns }} rollout status deployment/taintkeeper-controller

2. Check the policy: kube-apiserver itself gives pods the default tolerations (MutatingAdmissionPolicy
   taintkeeper-default-tolerations; {{ include "taintkeeper.flagValue" $notReady }} s not-ready, {{ include "taintkeeper.flagValue" $unreachable }} s unreachable, from the ConfigMap
   {{ $ns }}/taintkeeper-defaults, unless a pod's namespace asks for others):

     kubectl run taintkeeper-check --image=busybox --restart=Never --dry-run=server -o jsonpath='{.spec.tolerations}'

   Without them, the policy could not read its parameter and admits pods anyway (failurePolicy Ignore);
   the controller backfills them. docs/operating.md, "Admission: the webhook or the policy".

{{ else }}
1. Wait until it is up:

     kubectl -n {{ $ns }} rollout status deployment/taintkeeper-webhook deployment/taintkeeper-controller
{{- if eq .Values.certificates.mode "selfManaged" }}

   The webhook's pods wait in ContainerCreating until the Job {{ include "taintkeeper.certsJob" . }} has written the
   Secret taintkeeper-webhook-tls: kubectl -n {{ $ns }} logs job/{{ include "taintkeeper.certsJob" . }}
{{- else }}

   The webhook's pods wait in ContainerCreating until cert-manager has issued the Certificate
   taintkeeper-webhook-tls: kubectl -n {{ $ns }} get certificate taintkeeper-webhook-tls
{{- end }}

2. Check the webhook: its configuration has a caBundle, and a pod created now gets the default
   tolerations ({{ include "taintkeeper.flagValue" $notReady }} s not-ready, {{ include "taintkeeper.flagValue" $unreachable }} s unreachable, unless its namespace asks for others):

     kubectl get mutatingwebhookconfiguration taintkeeper -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | wc -c
     kubectl run taintkeeper-check --image=busybox --restart=Never --dry-run=server -o jsonpath='{.spec.tolerations}'

   Without them, the apiserver cannot reach the webhook and admits pods anyway (failurePolicy Ignore);
   the controller backfills them. docs/operating.md, "Troubleshooting".

{{- end }}
3. See what the controller sees: zones, tainted nodes, pending evictions and the leader
   (`pip install .` in taintkeeper's repository puts the kubectl plugin on the PATH; the leader's last
   monitor pass is read from its Lease in {{ $ns }}):

     kubectl taintkeeper status --lease-namespace {{ $ns }}
     kubectl taintkeeper explain node NODE
{{- if .Values.grafanaDashboard.enabled }}

   Over time: the dashboard "taintkeeper" (GRAFANA_URL/d/taintkeeper), which the Grafana sidecar
   loads from the ConfigMap {{ $ns }}/taintkeeper-grafana-dashboard when it searches {{ $ns }}.
{{- else }}

   Over time: the Grafana dashboard manifests/monitoring/grafana/taintkeeper.json: import it, or
   --set grafanaDashboard.enabled=true for a ConfigMap the Grafana sidecar loads (docs/operating.md,
   "Dashboard").
{{- end }}
{{- if .Values.operatorRoles.create }}

   For people who are not cluster-admin: bind the ClusterRole taintkeeper-viewer and the Role
   taintkeeper-viewer in {{ $ns }} (status, explain), or the ClusterRole taintkeeper-fencer with that
   Role (also fence, unfence). docs/operating.md, "Roles for operators":

     kubectl create clusterrolebinding taintkeeper-viewer:USER --clusterrole=taintkeeper-viewer --user=USER
     kubectl -n {{ $ns }} create rolebinding taintkeeper-viewer:USER --role=taintkeeper-viewer --user=USER
{{- end }}
{{- if get $flags "replace-builtin-defaults" }}

4. The webhook gives the built-in DefaultTolerationSeconds plugin's tolerations taintkeeper's seconds
   (--replace-builtin-defaults), for clusters where the plugin cannot be switched off. There, run the
   controller only as an observer (controller.flags.dry-run) or as the backfill alone
   (controller.flags.controllers: toleration-backfill): docs/operating.md, "Managed clusters".
{{- else }}

4. Switch off what taintkeeper replaces, or both act: kube-apiserver's DefaultTolerationSeconds plugin and
   kube-controller-manager's node lifecycle and taint eviction controllers (docs/operating.md, "Replacing
   the built-ins"; on managed clusters, "Managed clusters").
{{- end }}
{{- if .Values.networkPolicy.enabled }}

5. The NetworkPolicy lets only networkPolicy.apiserver (and Prometheus) reach the webhook: if it misses your
   apiservers, pods are admitted without the defaults. Check that
   taintkeeper_webhook_admission_reviews_total keeps rising.
{{- end }}
{{- end }}
