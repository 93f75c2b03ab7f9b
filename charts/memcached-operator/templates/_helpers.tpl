{{/* vim: set filetype=mustache: */}}

{{/*
name is the chart's name, shortened to fit a DNS label.
*/}}
{{- define "memcached-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
fullname is the base of every object name: the release name alone when it
already contains the chart name, so `helm install memcached-operator` does not
give memcached-operator-memcached-operator. 52 characters leave room for the
longest suffix (-webhook-selfsigned, and the test pod's -test-check) within 63.
*/}}
{{- define "memcached-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
chart is the helm.sh/chart label value.
*/}}
{{- define "memcached-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
labels go on every object. Pass a dict with "ctx" (the root context) and
"component"; selectorLabels are a subset so label queries that work on pods
work on everything else too.
*/}}
{{- define "memcached-operator.labels" -}}
{{ include "memcached-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: memcached-operator
helm.sh/chart: {{ include "memcached-operator.chart" .ctx }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
selectorLabels are the only labels Deployment and Service selectors use: they
never change across upgrades, and selectors are immutable.
*/}}
{{- define "memcached-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "memcached-operator.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
serviceAccountName is the operator's ServiceAccount, created by the chart or
brought by the user.
*/}}
{{- define "memcached-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "memcached-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
image is the operator image reference: image.registry (when set) joined with
image.repository; a digest pins it over the tag.
*/}}
{{- define "memcached-operator.image" -}}
{{- $repository := .Values.image.repository -}}
{{- with .Values.image.registry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository -}}
{{- end -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
imagePullSecrets merges global.imagePullSecrets (the parent chart's, when this
one is a subchart) with the chart's own.
*/}}
{{- define "memcached-operator.imagePullSecrets" -}}
{{- $secrets := concat (((.Values.global).imagePullSecrets) | default list) .Values.imagePullSecrets | uniq -}}
{{- with $secrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
leaderElectionNamespace is where the leader-election Lease lives.
*/}}
{{- define "memcached-operator.leaderElectionNamespace" -}}
{{- default .Release.Namespace .Values.operator.leaderElection.namespace -}}
{{- end -}}

{{/*
webhookServiceName and the webhook certificate's Secret are shared by the
Service, the Certificate, the Deployment's volume and the webhook
configurations.
*/}}
{{- define "memcached-operator.webhookServiceName" -}}
{{- printf "%s-webhook" (include "memcached-operator.fullname" .) -}}
{{- end -}}

{{- define "memcached-operator.webhookSecretName" -}}
{{- if include "memcached-operator.operatorCerts" . -}}
{{- /* Another name than the kubernetes.io/tls Secret of the other modes: a Secret's type is immutable, so switching modes with `helm upgrade` replaces it. */ -}}
{{- printf "%s-webhook-certs" (include "memcached-operator.fullname" .) -}}
{{- else -}}
{{- printf "%s-webhook-tls" (include "memcached-operator.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
operatorCerts is "true" when the operator keeps the webhook CA, serving
certificate and caBundles itself (cert-manager off, selfSignedCerts.managedBy
operator): the chart then renders no certificate data, so every `helm
template` render is the same.
*/}}
{{- define "memcached-operator.operatorCerts" -}}
{{- if and (not .Values.certManager.enabled) (eq .Values.selfSignedCerts.managedBy "operator") -}}true{{- end -}}
{{- end -}}

{{- define "memcached-operator.webhookCertificateName" -}}
{{- printf "%s-webhook" (include "memcached-operator.fullname" .) -}}
{{- end -}}

{{/*
servingDNSNames are the names the serving certificate covers: every name the
API server may use for the webhook Service and, when the operator serves
metrics with it, the metrics Service's, so scrapers can verify it too.
*/}}
{{- define "memcached-operator.servingDNSNames" -}}
{{- $ns := .Release.Namespace -}}
{{- $services := list (include "memcached-operator.webhookServiceName" .) -}}
{{- if and .Values.metrics.enabled .Values.metrics.useChartCertificate -}}
{{- $services = append $services (include "memcached-operator.metricsServiceName" .) -}}
{{- end -}}
{{- $names := list -}}
{{- range $services -}}
{{- $names = concat $names (list . (printf "%s.%s" . $ns) (printf "%s.%s.svc" . $ns) (printf "%s.%s.svc.%s" . $ns $.Values.clusterDomain)) -}}
{{- end -}}
{{- $names | toJson -}}
{{- end -}}

{{/*
metricsScraperName names the ServiceAccount (and, with "-token", its token
Secret) that the chart's ServiceMonitor scrapes with.
*/}}
{{- define "memcached-operator.metricsScraperName" -}}
{{- printf "%s-metrics-scraper" (include "memcached-operator.fullname" .) -}}
{{- end -}}

{{/*
chartScraper is "true" when the chart creates the ServiceMonitor's scraper
identity itself (a ServiceMonitor without user-given authorization).
*/}}
{{- define "memcached-operator.chartScraper" -}}
{{- if and .Values.metrics.enabled .Values.metrics.serviceMonitor.enabled (not .Values.metrics.serviceMonitor.authorization) -}}true{{- end -}}
{{- end -}}

{{- define "memcached-operator.metricsServiceName" -}}
{{- printf "%s-metrics" (include "memcached-operator.fullname" .) -}}
{{- end -}}

{{/*
generatedCerts returns (as JSON) the CA and serving certificate used when
cert-manager is off. The Secret and both webhook configurations render from
separate templates but must agree, so the first call stores the result on the
root context for the others. An existing Secret is reused: certificates then
survive upgrades instead of changing the caBundle at every `helm upgrade`.
*/}}
{{- define "memcached-operator.generatedCerts" -}}
{{- if not (hasKey $ "memcachedOperatorCerts") -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "memcached-operator.webhookSecretName" .) -}}
{{- $data := (($secret).data) | default dict -}}
{{- $certs := dict -}}
{{- if and (index $data "ca.crt") (index $data "tls.crt") (index $data "tls.key") -}}
{{- $certs = dict "ca" (index $data "ca.crt" | b64dec) "cert" (index $data "tls.crt" | b64dec) "key" (index $data "tls.key" | b64dec) -}}
{{- else -}}
{{- $days := int .Values.selfSignedCerts.validityDays -}}
{{- $ca := genCA (printf "%s-ca" (include "memcached-operator.fullname" .)) $days -}}
{{- $dns := include "memcached-operator.servingDNSNames" . | fromJsonArray -}}
{{- $cert := genSignedCert (index $dns 2) nil $dns $days $ca -}}
{{- $certs = dict "ca" $ca.Cert "cert" $cert.Cert "key" $cert.Key -}}
{{- end -}}
{{- $_ := set $ "memcachedOperatorCerts" $certs -}}
{{- end -}}
{{- get $ "memcachedOperatorCerts" | toJson -}}
{{- end -}}

{{/*
webhookClientConfig is the part of every webhook that says how to reach it
and how to trust it.
*/}}
{{- define "memcached-operator.webhookClientConfig" -}}
{{- $root := .ctx -}}
clientConfig:
  service:
    name: {{ include "memcached-operator.webhookServiceName" $root }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ .path }}
    port: {{ $root.Values.webhook.service.port }}
  {{- if and (not $root.Values.certManager.enabled) (not (include "memcached-operator.operatorCerts" $root)) }}
  caBundle: {{ (include "memcached-operator.generatedCerts" $root | fromJson).ca | b64enc }}
  {{- end }}
{{- end -}}

{{/*
webhookCommon are the settings every webhook of the chart shares.
namespaceSelector: in namespace-scoped mode only the watched namespaces are
admitted, so one install never judges another tenant's Memcacheds; the
release namespace (unless watched) and webhook.excludeNamespaces are always
left out (see excludedNamespaces), so a down operator can never block its own
namespace or the cluster's system namespaces.
*/}}
{{/*
specMatchConditions send the Memcached webhooks only what can break a rule or
needs a default: a create, or an update that changes the spec of an object
not being deleted. A label, an annotation, a finalizer's removal or a status
write then never waits on the webhook, nor fails while it is down.
*/}}
{{- define "memcached-operator.specMatchConditions" -}}
matchConditions:
  - name: spec-created-or-changed
    expression: request.operation == "CREATE" || (!has(object.metadata.deletionTimestamp) && object.spec != oldObject.spec)
{{- end -}}

{{- define "memcached-operator.webhookCommon" -}}
{{- $v := .Values.webhook -}}
admissionReviewVersions: ["v1"]
sideEffects: None
matchPolicy: Equivalent
failurePolicy: {{ $v.failurePolicy }}
timeoutSeconds: {{ $v.timeoutSeconds }}
namespaceSelector:
  {{- with $v.namespaceSelector.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    {{- with .Values.watchNamespaces }}
    - key: kubernetes.io/metadata.name
      operator: In
      values: {{ toJson . }}
    {{- end }}
    {{- with include "memcached-operator.excludedNamespaces" . | fromJsonArray }}
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ toJson . }}
    {{- end }}
    {{- with $v.namespaceSelector.matchExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/*
excludedNamespaces are the namespaces the webhooks never see. The release
namespace is one unless Memcacheds are meant to live there: when it is watched,
or when it is `default`, where a quick-start `helm install` puts the operator
next to the users' own workloads.
*/}}
{{- define "memcached-operator.excludedNamespaces" -}}
{{- $ex := .Values.webhook.excludeNamespaces | default list -}}
{{- if and .Values.webhook.excludeReleaseNamespace (ne .Release.Namespace "default") (not (has .Release.Namespace .Values.watchNamespaces)) -}}
{{- $ex = prepend $ex .Release.Namespace -}}
{{- end -}}
{{- $ex | uniq | toJson -}}
{{- end -}}

{{/*
testNamespace is where `helm test` creates its Memcacheds: a namespace the
operator watches and the webhooks admit.
*/}}
{{- define "memcached-operator.testNamespace" -}}
{{- if .Values.test.namespace -}}
{{- .Values.test.namespace -}}
{{- else if .Values.watchNamespaces -}}
{{- first .Values.watchNamespaces -}}
{{- else -}}
default
{{- end -}}
{{- end -}}

{{/*
validate fails the render for combinations that cannot work, with the fix in
the message.
*/}}
{{- define "memcached-operator.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.operator.leaderElection.enabled) -}}
{{- fail "replicaCount > 1 needs operator.leaderElection.enabled=true: replicas without leader election reconcile the same Memcacheds at once and fight over them" -}}
{{- end -}}
{{- if and (include "memcached-operator.operatorCerts" .) (gt (int .Values.selfSignedCerts.servingValidityDays) (int .Values.selfSignedCerts.validityDays)) -}}
{{- fail "selfSignedCerts.servingValidityDays must be at most selfSignedCerts.validityDays: a serving certificate never outlives its CA" -}}
{{- end -}}
{{- if and .Values.certManager.issuerRef.name (not .Values.certManager.enabled) -}}
{{- fail "certManager.issuerRef is set but certManager.enabled=false: enable cert-manager or drop the issuerRef" -}}
{{- end -}}
{{- /* Only against a live cluster (lookup finds kube-system): offline renders such as `helm template` know no API groups. */ -}}
{{- if and .Values.certManager.enabled (lookup "v1" "Namespace" "" "kube-system") (not (.Capabilities.APIVersions.Has "cert-manager.io/v1")) -}}
{{- fail "cert-manager.io/v1 is not served by this cluster: install cert-manager first, or set certManager.enabled=false to let the chart generate the webhook certificate" -}}
{{- end -}}
{{- if .Values.test.enabled -}}
{{- $ns := include "memcached-operator.testNamespace" . -}}
{{- if has $ns (include "memcached-operator.excludedNamespaces" . | fromJsonArray) -}}
{{- fail (printf "test.namespace %q is excluded from the webhooks (release namespace or webhook.excludeNamespaces), so helm test could not see them reject anything: pick another test.namespace" $ns) -}}
{{- end -}}
{{- if and .Values.watchNamespaces (not (has $ns .Values.watchNamespaces)) -}}
{{- fail (printf "test.namespace %q is not in watchNamespaces: the operator would never reconcile the test's Memcached" $ns) -}}
{{- end -}}
{{- end -}}
{{- end -}}
