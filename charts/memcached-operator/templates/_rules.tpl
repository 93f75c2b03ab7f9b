{{- /*
The operator's own rules (internal/policy), in CEL, for the rules policy
(validatingadmissionpolicy-rules.yaml). Each expression is written once with
@ for the object judged and V. for its variables; the policy renders it for
the new object and, to ratchet, for the old one.
*/}}

{{- /* A label selector X (an expression that is not null) is one the API server accepts. */}}
{{- define "memcached-operator.cel.selector" -}}
(!has(X.matchLabels) || X.matchLabels.all(k, !format.qualifiedName().validate(k).hasValue() && !format.labelValue().validate(X.matchLabels[k]).hasValue())) && (!has(X.matchExpressions) || X.matchExpressions.all(e, !format.qualifiedName().validate(e.key).hasValue() && (e.operator in ['In', 'NotIn'] ? e.?values.orValue([]).size() > 0 : e.operator in ['Exists', 'DoesNotExist'] && e.?values.orValue([]).size() == 0) && e.?values.orValue([]).all(v, !format.labelValue().validate(v).hasValue())))
{{- end }}

{{- /* A node selector term X. */}}
{{- define "memcached-operator.cel.nodeTerm" -}}
X.?matchExpressions.orValue([]).all(r, !format.qualifiedName().validate(r.key).hasValue() && (r.operator in ['In', 'NotIn'] ? r.?values.orValue([]).size() > 0 : r.operator in ['Exists', 'DoesNotExist'] ? r.?values.orValue([]).size() == 0 : r.operator in ['Gt', 'Lt'] && r.?values.orValue([]).size() == 1 && r.values[0].matches(r'^[-+]?[0-9]{1,18}$')) && (r.operator in ['Gt', 'Lt'] || r.?values.orValue([]).all(v, !format.labelValue().validate(v).hasValue()))) && X.?matchFields.orValue([]).all(r, r.key == 'metadata.name' && r.operator in ['In', 'NotIn'] && r.?values.orValue([]).size() == 1)
{{- end }}

{{- /* A pod affinity term X. */}}
{{- define "memcached-operator.cel.podTerm" -}}
X.?topologyKey.orValue('') != '' && !format.qualifiedName().validate(X.topologyKey).hasValue() && (!has(X.labelSelector) || ({{ include "memcached-operator.cel.selector" . | replace "X" "X.labelSelector" }})) && (!has(X.namespaceSelector) || ({{ include "memcached-operator.cel.selector" . | replace "X" "X.namespaceSelector" }})) && X.?namespaces.orValue([]).all(n, !format.dns1123Label().validate(n).hasValue()) && (X.?matchLabelKeys.orValue([]) + X.?mismatchLabelKeys.orValue([])).all(i, k, !format.qualifiedName().validate(k).hasValue() && (X.?matchLabelKeys.orValue([]) + X.?mismatchLabelKeys.orValue([])).indexOf(k) == i && has(X.labelSelector) && !(k in X.labelSelector.?matchLabels.orValue({})) && !X.labelSelector.?matchExpressions.orValue([]).exists(e, e.key == k))
{{- end }}

{{- /* Resource requirements X. */}}
{{- define "memcached-operator.cel.resources" -}}
X.?claims.orValue([]).size() == 0 && [X.?limits.orValue({}), X.?requests.orValue({})].all(l, l.all(n, n in ['cpu', 'memory', 'ephemeral-storage'] && sign(quantity(string(l[n]))) >= 0)) && X.?requests.orValue({}).all(n, !(n in X.?limits.orValue({})) || !quantity(string(X.requests[n])).isGreaterThan(quantity(string(X.limits[n]))))
{{- end }}

{{- /* A NetworkPolicy peer X. */}}
{{- define "memcached-operator.cel.peer" -}}
(!has(X.podSelector) || ({{ include "memcached-operator.cel.selector" . | replace "X" "X.podSelector" }})) && (!has(X.namespaceSelector) || ({{ include "memcached-operator.cel.selector" . | replace "X" "X.namespaceSelector" }})) && (has(X.ipBlock) ? !has(X.podSelector) && !has(X.namespaceSelector) && isCIDR(X.ipBlock.cidr) && string(cidr(X.ipBlock.cidr).masked()) == X.ipBlock.cidr && X.ipBlock.?except.orValue([]).all(e, isCIDR(e) && string(cidr(e).masked()) == e && cidr(X.ipBlock.cidr).containsCIDR(e) && cidr(e).prefixLength() > cidr(X.ipBlock.cidr).prefixLength()) : has(X.podSelector) || has(X.namespaceSelector))
{{- end }}

{{- /* Variables of @, named V.<name>. */}}
{{- define "memcached-operator.cel.variables" }}
- name: memQ
  expression: "@.spec.?resources.?limits[?'memory'].optMap(q, quantity(string(q)))"
- name: hasMemLimit
  expression: "V.memQ.hasValue() && sign(V.memQ.value()) != 0"
- name: rawMB
  expression: "V.hasMemLimit ? int(V.memQ.value().asApproximateFloat() / 1048576.0) * 90 / 100 : 64"
- name: memMB
  expression: "has(@.spec.memoryLimitMB) ? @.spec.memoryLimitMB : V.rawMB < 8 ? 8 : V.rawMB > 1048576 ? 1048576 : V.rawMB"
- name: cpuQ
  expression: "@.spec.?resources.?limits[?'cpu'].optMap(q, quantity(string(q)))"
- name: cpuF
  expression: "V.cpuQ.hasValue() ? V.cpuQ.value().asApproximateFloat() : 0.0"
- name: cores
  expression: "int(V.cpuF) + (double(int(V.cpuF)) < V.cpuF ? 1 : 0)"
- name: threads
  expression: "has(@.spec.threads) ? @.spec.threads : !V.cpuQ.hasValue() || sign(V.cpuQ.value()) == 0 ? 4 : V.cores < 1 ? 1 : V.cores > 64 ? 64 : V.cores"
- name: item
  expression: "@.spec.?maxItemSize.orValue('')"
- name: itemBytes
  expression: "!V.item.matches(r'^[0-9]{1,13}[kKmM]?$') ? 0 : V.item.matches(r'[kK]$') ? int(V.item.substring(0, size(V.item) - 1)) * 1024 : V.item.matches(r'[mM]$') ? int(V.item.substring(0, size(V.item) - 1)) * 1048576 : int(V.item)"
- name: args
  expression: "@.spec.?extraArgs.orValue([])"
- name: longNames
  expression: "V.args.map(a, a.startsWith('--') ? a.substring(2).split('=')[0] : '')"
- name: long
  expression: "V.longNames.map(n, n == '' ? '' : n in variables.longOptions ? n : variables.longOptions.filter(l, l.startsWith(n)).size() == 1 ? variables.longOptions.filter(l, l.startsWith(n))[0] : '?')"
- name: shortHead
  expression: "V.args.map(a, a.startsWith('--') ? '' : a.find(r'^-[MCFXW]*[RbBfnDo]'))"
- name: needsNext
  expression: "V.args.transformList(i, a, (V.shortHead[i] != '' && V.shortHead[i] == a) || (a.startsWith('--') && !a.contains('=') && V.long[i] in variables.longValued))"
- name: isValue
  expression: "V.args.transformList(i, a, i > 0 && V.needsNext[i - 1])"
- name: letter
  expression: "V.args.transformList(i, a, V.isValue[i] ? '' : a.startsWith('--') ? variables.longLetter[?V.long[i]].orValue('') : V.shortHead[i] != '' ? V.shortHead[i].substring(size(V.shortHead[i]) - 1) : '')"
- name: value
  expression: "V.args.transformList(i, a, V.letter[i] == '' ? '' : a.startsWith('--') && a.contains('=') ? a.substring(a.indexOf('=') + 1) : !a.startsWith('--') && size(a) > size(V.shortHead[i]) ? a.substring(size(V.shortHead[i])) : i + 1 < size(V.args) ? V.args[i + 1] : '')"
- name: argOK
  expression: >-
    V.args.transformList(i, a, V.isValue[i] ? !a.startsWith('-') :
    a.startsWith('--') ? a != '--' && V.long[i] in variables.longAllowed && (V.long[i] in variables.longValued ? a.contains('=') || i + 1 < size(V.args) : !a.contains('=')) :
    size(a) > 1 && a.matches(r'^-[MCFXW]*([RbBfnDo].*)?$') && (V.shortHead[i] != a || i + 1 < size(V.args)))
- name: badArgs
  expression: "V.argOK.transformList(i, ok, ok ? -1 : i).filter(i, i >= 0)"
- name: valueOK
  expression: >-
    V.args.transformList(i, a, V.letter[i] == '' || (V.value[i].trim() != '' &&
    (V.letter[i] == 'B' ? V.value[i] in ['auto', 'binary', 'ascii'] && (!has(@.spec.auth) || V.value[i] == 'ascii') :
    V.letter[i] in ['R', 'b', 'n'] ? V.value[i].matches(r'^[+]?[0-9]{1,18}$') && int(V.value[i]) > 0 :
    V.letter[i] == 'f' ? V.value[i].matches(r'^[0-9]*[.]?[0-9]+([eE][-+]?[0-9]{1,3})?$') && double(V.value[i]) > 1.0 :
    V.letter[i] == 'D' ? V.value[i].matches(r'^[\x00-\x7f]$') :
    V.value[i].split(',').all(s, s.trim().split('=')[0] in variables.extendedOptions))))
- name: badValues
  expression: "V.valueOK.transformList(i, ok, ok ? -1 : i).filter(i, i >= 0)"
- name: exporter
  expression: "@.spec.?monitoring.?exporter.?enabled.orValue(false)"
- name: tls
  expression: "@.spec.?tls.?enabled.orValue(false)"
{{- end }}

{{- /* The rules of @: name, expression, message. */}}
{{- define "memcached-operator.cel.rules" }}
- name: name
  expression: "@.metadata.name.matches(r'^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(@.metadata.name) <= 63"
  message: "metadata.name: must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, at most 63 characters): it is also the fleet's Service name"
- name: images
  expression: "[@.spec.?image, @.spec.?auth.?reloaderImage, @.spec.?tls.?reloaderImage, @.spec.?monitoring.?exporter.?image, @.spec.?warmRestart.?launcherImage].all(i, !i.hasValue() || (i.value() != '' && i.value().trim() == i.value()))"
  message: "spec.image, spec.auth.reloaderImage, spec.tls.reloaderImage, spec.monitoring.exporter.image, spec.warmRestart.launcherImage: must name an image, without surrounding spaces"
- name: memory
  expression: "!V.hasMemLimit || !quantity(string(V.memMB) + 'Mi').isGreaterThan(V.memQ.value())"
  message: "spec.memoryLimitMB (or the 90% of resources.limits.memory it is derived from, at least 8MB) must fit inside resources.limits.memory, or the container is OOM-killed once the cache fills"
- name: warmMemory
  expression: "!@.spec.?warmRestart.?enabled.orValue(false) || V.memMB >= 64"
  message: "spec.memoryLimitMB (or the 90% of resources.limits.memory it is derived from): with warmRestart memcached allocates a page of every slab class up front and needs at least 64 MB of item memory"
- name: maxItemSize
  expression: "V.item == '' || (V.itemBytes >= 524288 && V.itemBytes <= 1073741824 && V.itemBytes % 524288 == 0 && V.itemBytes <= V.memMB * 1048576 / 2)"
  message: "spec.maxItemSize: must be a multiple of 512k (such as 512k, 1m or 1536k) up to 1024m, and at most half of the item memory: memcached refuses to start otherwise"
- name: maxConnections
  expression: "!has(@.spec.maxConnections) || @.spec.maxConnections >= 5 * V.threads + 16"
  message: "spec.maxConnections: must be at least 5 × threads + 16: memcached needs those descriptors itself and refuses to start otherwise"
- name: extraArgs
  expression: "V.badArgs.size() == 0"
  message: "spec.extraArgs: only -M, -C, -F, -X, -W, -R, -b, -B, -f, -n, -D, -o and their long forms, each with its value"
  messageExpression: >-
    'spec.extraArgs[' + string(V.badArgs[0]) + ']: ' + V.args[V.badArgs[0]] + ': ' + (
    V.isValue[V.badArgs[0]] ? 'a separate option value may not start with \'-\' (attach it, as in -D-)' :
    V.args[V.badArgs[0]] == '--' ? 'ends memcached\'s options; everything after it would be ignored' :
    V.args[V.badArgs[0]].startsWith('--') ? (
    V.long[V.badArgs[0]] == '?' ? '--' + V.longNames[V.badArgs[0]] + ' is not a memcached option, or names more than one: memcached refuses to start' :
    variables.longToShort[V.long[V.badArgs[0]]] in variables.shortReasons ? '--' + V.long[V.badArgs[0]] + ' ' + variables.shortReasons[variables.longToShort[V.long[V.badArgs[0]]]] :
    V.long[V.badArgs[0]] in variables.longValued ? '--' + V.long[V.badArgs[0]] + ' needs a value' : '--' + V.long[V.badArgs[0]] + ' takes no value') :
    size(V.args[V.badArgs[0]]) < 2 || !V.args[V.badArgs[0]].startsWith('-') ? 'is not an option; memcached takes options only (for example -o modern or --disable-cas)' :
    V.args[V.badArgs[0]].find(r'^-[^RbBfnDo]*').substring(1).split('').filter(c, c != '' && !(c in ['M', 'C', 'F', 'X', 'W'])).size() == 0 ? 'needs a value' :
    V.args[V.badArgs[0]].find(r'^-[^RbBfnDo]*').substring(1).split('').filter(c, c != '' && !(c in ['M', 'C', 'F', 'X', 'W'])).map(c,
    '-' + c + ' ' + (c in variables.shortReasons ? variables.shortReasons[c] : 'is not a memcached option: memcached refuses to start')).join('; '))
- name: extraArgValues
  expression: "V.badValues.size() == 0"
  message: "spec.extraArgs: -B takes auto, binary or ascii (only ascii with spec.auth); -R, -b and -n a whole number above 0; -f a number above 1; -D one character; -o memcached 1.6's sub-options that run in the fleet's pod"
  messageExpression: >-
    'spec.extraArgs[' + string(V.badValues[0]) + ']: ' + V.args[V.badValues[0]] + ': -' + V.letter[V.badValues[0]] + ' ' + (
    V.value[V.badValues[0]].trim() == '' ? 'needs a value' :
    V.letter[V.badValues[0]] == 'B' ? (has(@.spec.auth) ? 'must be ascii: spec.auth is memcached\'s ASCII authentication, which serves the ASCII protocol only' : 'takes auto, binary or ascii') :
    V.letter[V.badValues[0]] in ['R', 'b', 'n'] ? 'takes a whole number above 0' :
    V.letter[V.badValues[0]] == 'f' ? 'takes a number above 1' :
    V.letter[V.badValues[0]] == 'D' ? 'takes one character' :
    'takes memcached 1.6\'s sub-options that run in the fleet\'s pod (no ssl_*, ext_* or slab_chunk_max): ' + V.value[V.badValues[0]].split(',').filter(s, !(s.trim().split('=')[0] in variables.extendedOptions)).join(', ') + ' is not one') +
    ': memcached refuses to start otherwise'
- name: ports
  expression: "!V.exporter || (@.spec.?port.orValue(0) != 9150 && @.spec.?tls.?plaintextPort.orValue(0) != 9150)"
  message: "spec.port, spec.tls.plaintextPort: port 9150 is the exporter's, which runs in the same pod: choose another port"
- name: tls
  expression: >-
    (!V.tls || has(@.spec.tls.issuerRef)) && (!has(@.spec.tls) || !has(@.spec.tls.issuerRef) || (!format.dns1123Subdomain().validate(@.spec.tls.issuerRef.name).hasValue() &&
    @.spec.tls.issuerRef.?kind.orValue('Issuer') in ['Issuer', 'ClusterIssuer'] && (!has(@.spec.tls.issuerRef.group) || !format.dns1123Subdomain().validate(@.spec.tls.issuerRef.group).hasValue()))) &&
    @.spec.?tls.?clientAuth.orValue('None') in ['None', 'Request', 'Require'] &&
    (!has(@.spec.tls) || !has(@.spec.tls.plaintextPort) || (@.spec.tls.plaintextPort >= 1 && @.spec.tls.plaintextPort <= 65535 && @.spec.tls.plaintextPort != @.spec.?port.orValue(11211) && @.spec.tls.plaintextPort != 11299)) &&
    (!V.tls || @.spec.?port.orValue(11211) != 11299)
  message: "spec.tls: an enabled TLS needs issuerRef (a DNS-1123 name, kind Issuer or ClusterIssuer); clientAuth is None, Request or Require; plaintextPort is 1-65535 and differs from spec.port and from 11299, the pod's loopback listener (which spec.port may not take either)"
- name: auth
  expression: "!has(@.spec.auth) || (!format.dns1123Subdomain().validate(@.spec.auth.secretRef.name).hasValue() && (!has(@.spec.auth.secretRef.key) || (@.spec.auth.secretRef.key.matches(r'^[-._a-zA-Z0-9]{1,253}$') && !@.spec.auth.secretRef.key.startsWith('..') && @.spec.auth.secretRef.key != '.')))"
  message: "spec.auth.secretRef: name must be a DNS-1123 subdomain, key a Secret key (letters, digits, '-', '_', '.'; not '.' nor starting with '..')"
- name: labels
  expression: "[@.spec.?podLabels.orValue({}), @.spec.?nodeSelector.orValue({}), @.spec.?monitoring.?serviceMonitor.?labels.orValue({})].all(m, m.all(k, !format.qualifiedName().validate(k).hasValue() && !format.labelValue().validate(m[k]).hasValue())) && !['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by'].exists(k, k in @.spec.?podLabels.orValue({}))"
  message: "spec.podLabels, spec.nodeSelector, spec.monitoring.serviceMonitor.labels: keys and values must be valid labels; podLabels may not set app.kubernetes.io/name, instance or managed-by, which the operator selects its pods by"
- name: service
  expression: >-
    !has(@.spec.service) || (@.spec.service.?labels.orValue({}).all(k, !format.qualifiedName().validate(k).hasValue() && !format.labelValue().validate(@.spec.service.labels[k]).hasValue() &&
    !(k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by']) &&
    (!k.contains('/') || !(k.split('/')[0].lowerAscii() in ['kubernetes.io', 'k8s.io'] || k.split('/')[0].lowerAscii().endsWith('.kubernetes.io') || k.split('/')[0].lowerAscii().endsWith('.k8s.io')))) &&
    @.spec.service.?annotations.orValue({}).all(k, !format.qualifiedName().validate(k.lowerAscii()).hasValue()))
  message: "spec.service: labels must be valid, none the operator's (app.kubernetes.io/name, instance, managed-by) nor under kubernetes.io or k8s.io; annotation keys must be qualified names"
- name: podAnnotations
  expression: >-
    @.spec.?podAnnotations.orValue({}).all(k, !format.qualifiedName().validate(k.lowerAscii()).hasValue() &&
    (!k.contains('/') || k in ['cluster-autoscaler.kubernetes.io/safe-to-evict', 'kubectl.kubernetes.io/default-container', 'kubectl.kubernetes.io/default-logs-container'] ||
    !(k.split('/')[0].lowerAscii() in ['kubernetes.io', 'k8s.io'] || k.split('/')[0].lowerAscii().endsWith('.kubernetes.io') || k.split('/')[0].lowerAscii().endsWith('.k8s.io'))) &&
    (!k.contains('/') || !(k.split('/')[0].lowerAscii() == 'cache.example.com' || k.split('/')[0].lowerAscii().endsWith('.cache.example.com'))))
  message: "spec.podAnnotations: keys must be qualified names, none under cache.example.com (the operator's own), and none under kubernetes.io or k8s.io (AppArmor and seccomp profiles, the deletion cost) but cluster-autoscaler.kubernetes.io/safe-to-evict, kubectl.kubernetes.io/default-container and kubectl.kubernetes.io/default-logs-container"
- name: podSpec
  expression: >-
    @.spec.?imagePullSecrets.orValue([]).all(s, !format.dns1123Subdomain().validate(s.?name.orValue('')).hasValue()) &&
    (!has(@.spec.priorityClassName) || !format.dns1123Subdomain().validate(@.spec.priorityClassName).hasValue()) &&
    @.spec.?tolerations.orValue([]).all(t, (t.?key.orValue('') == '' || !format.qualifiedName().validate(t.key).hasValue()) &&
    (t.?operator.orValue('') == 'Exists' ? t.?value.orValue('') == '' : t.?operator.orValue('') in ['', 'Equal'] && t.?key.orValue('') != '' && !format.labelValue().validate(t.?value.orValue('')).hasValue()) &&
    t.?effect.orValue('') in ['', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'] && (!has(t.tolerationSeconds) || t.?effect.orValue('') == 'NoExecute'))
  message: "spec.imagePullSecrets, spec.priorityClassName: DNS-1123 names; spec.tolerations: a qualified key, operator Exists (no value) or Equal (a key and a label value), effect NoSchedule, PreferNoSchedule or NoExecute, tolerationSeconds only with NoExecute"
- name: affinity
  expression: >-
    !has(@.spec.affinity) || (
    (!has(@.spec.affinity.nodeAffinity) || (
    (!has(@.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) || (@.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).size() > 0 &&
    @.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.all(x, {{ include "memcached-operator.cel.nodeTerm" . | replace "X" "x" }}))) &&
    @.spec.affinity.nodeAffinity.?preferredDuringSchedulingIgnoredDuringExecution.orValue([]).all(p, p.weight >= 1 && p.weight <= 100 && {{ include "memcached-operator.cel.nodeTerm" . | replace "X" "p.preference" }}))) &&
    [@.spec.affinity.?podAffinity, @.spec.affinity.?podAntiAffinity].all(pa, !pa.hasValue() || (
    pa.value().?requiredDuringSchedulingIgnoredDuringExecution.orValue([]).all(x, {{ include "memcached-operator.cel.podTerm" . | replace "X" "x" }}) &&
    pa.value().?preferredDuringSchedulingIgnoredDuringExecution.orValue([]).all(w, w.weight >= 1 && w.weight <= 100 && {{ include "memcached-operator.cel.podTerm" . | replace "X" "w.podAffinityTerm" }}))))
  message: "spec.affinity: node selector terms with qualified keys and the values their operator takes (matchFields: metadata.name, In or NotIn, one value), weights 1-100, pod affinity terms with a topologyKey, valid selectors and namespaces, matchLabelKeys and mismatchLabelKeys distinct, qualified, with a labelSelector that does not name them"
- name: topologySpreadConstraints
  expression: >-
    @.spec.?topologySpreadConstraints.orValue([]).all(c, c.maxSkew > 0 && c.?topologyKey.orValue('') != '' && !format.qualifiedName().validate(c.topologyKey).hasValue() &&
    c.?whenUnsatisfiable.orValue('') in ['DoNotSchedule', 'ScheduleAnyway'] && (!has(c.minDomains) || (c.minDomains > 0 && c.whenUnsatisfiable == 'DoNotSchedule')) &&
    [c.?nodeAffinityPolicy, c.?nodeTaintsPolicy].all(p, !p.hasValue() || p.value() in ['Honor', 'Ignore']) &&
    (!has(c.labelSelector) || ({{ include "memcached-operator.cel.selector" . | replace "X" "c.labelSelector" }})) &&
    c.?matchLabelKeys.orValue([]).all(i, k, !format.qualifiedName().validate(k).hasValue() && c.matchLabelKeys.indexOf(k) == i &&
    (!has(c.labelSelector) || (!(k in c.labelSelector.?matchLabels.orValue({})) && !c.labelSelector.?matchExpressions.orValue([]).exists(e, e.key == k)))))
  message: "spec.topologySpreadConstraints: maxSkew above 0, a qualified topologyKey, whenUnsatisfiable DoNotSchedule or ScheduleAnyway, minDomains above 0 and only with DoNotSchedule, node policies Honor or Ignore, a valid labelSelector, matchLabelKeys distinct, qualified and not keys of the labelSelector"
- name: resources
  expression: >-
    [@.spec.?resources, @.spec.?monitoring.?exporter.?resources].all(r, !r.hasValue() || ({{ include "memcached-operator.cel.resources" . | replace "X" "r.value()" }}))
  message: "spec.resources, spec.monitoring.exporter.resources: only cpu, memory and ephemeral-storage, none negative, requests at most the limits, no claims"
- name: networkPolicy
  expression: >-
    [@.spec.?networkPolicy.?from.orValue([]), @.spec.?networkPolicy.?metricsFrom.orValue([])].all(l, l.all(x, {{ include "memcached-operator.cel.peer" . | replace "X" "x" }}))
  message: "spec.networkPolicy: each peer is an ipBlock alone (a canonical CIDR, each except a canonical CIDR strictly inside it) or valid pod and namespace selectors"
- name: monitoring
  expression: "!@.spec.?monitoring.?serviceMonitor.?enabled.orValue(false) || V.exporter"
  message: "spec.monitoring.serviceMonitor.enabled needs spec.monitoring.exporter.enabled: the ServiceMonitor scrapes the exporter"
{{- end }}
