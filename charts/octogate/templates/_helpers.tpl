{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "octogate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects. Kept to 40 characters so that suffixed names
(e.g. -kube-apiserver-client) stay valid. */}}
{{- define "octogate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "octogate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "octogate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "octogate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "octogate.labels" -}}
helm.sh/chart: {{ include "octogate.chart" . }}
{{ include "octogate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "octogate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "octogate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* github.orgs is the one value without a default: stop rendering with a message naming it. */}}
{{- define "octogate.orgs" -}}
{{- if not .Values.github.orgs }}
{{- fail "github.orgs is required: list the GitHub organizations whose members may log in, e.g. --set 'github.orgs={acme=2001}', each org pinned to its id (gh api orgs/acme --jq .id) (or --set 'github.orgs={*}' to admit any GitHub user)" }}
{{- end }}
{{- join "," .Values.github.orgs }}
{{- end }}

{{/* The Service's in-cluster DNS name, which kube-apiserver uses for admission webhooks. */}}
{{- define "octogate.serviceHost" -}}
{{- printf "%s.%s.svc" (include "octogate.fullname" .) .Release.Namespace }}
{{- end }}

{{/* Base URL kube-apiserver uses for /authenticate and /authorize. */}}
{{- define "octogate.webhookURL" -}}
{{- if .Values.kubeAPIServer.webhookURL }}
{{- trimSuffix "/" .Values.kubeAPIServer.webhookURL }}
{{- else if .Values.service.clusterIP }}
{{- if contains ":" .Values.service.clusterIP }}
{{- printf "https://[%s]:%d" .Values.service.clusterIP (int .Values.service.port) }}
{{- else }}
{{- printf "https://%s:%d" .Values.service.clusterIP (int .Values.service.port) }}
{{- end }}
{{- else }}
{{- printf "https://%s:%d" (include "octogate.serviceHost" .) (int .Values.service.port) }}
{{- end }}
{{- end }}

{{/* The hosts this release answers at, as a JSON list: its Service's names, its cluster IP and the
host of kubeAPIServer.webhookURL. */}}
{{- define "octogate.ownHosts" -}}
{{- $fullname := include "octogate.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $hosts := list $fullname (printf "%s.%s" $fullname $ns) (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.%s" $fullname $ns .Values.clusterDomain) (include "octogate.webhookHost" .) }}
{{- with .Values.service.clusterIP }}{{ $hosts = append $hosts . }}{{ end }}
{{- $hosts | toJson }}
{{- end }}

{{/* The host of octogate.webhookURL without port or brackets. */}}
{{- define "octogate.webhookHost" -}}
{{- $host := (urlParse (include "octogate.webhookURL" .)).host }}
{{- if hasPrefix "[" $host }}
{{- regexReplaceAll "^\\[(.*)\\](:[0-9]+)?$" $host "${1}" }}
{{- else }}
{{- regexReplaceAll ":[0-9]+$" $host "" }}
{{- end }}
{{- end }}

{{/* Serving certificate SANs as {"dns": [...], "ips": [...]} in JSON. */}}
{{- define "octogate.sans" -}}
{{- $fullname := include "octogate.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $dns := list $fullname (printf "%s.%s" $fullname $ns) (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.%s" $fullname $ns .Values.clusterDomain) }}
{{- $ips := list }}
{{- if .Values.service.clusterIP }}
{{- $ips = append $ips .Values.service.clusterIP }}
{{- end }}
{{- $host := include "octogate.webhookHost" . }}
{{- if regexMatch "^[0-9.]+$|:" $host }}
{{- $ips = append $ips $host }}
{{- else }}
{{- $dns = append $dns $host }}
{{- end }}
{{- with include "octogate.authenticationConfigIssuerHost" . }}
{{- if regexMatch "^[0-9.]+$|:" . }}
{{- $ips = append $ips . }}
{{- else }}
{{- $dns = append $dns . }}
{{- end }}
{{- end }}
{{- $dns = concat $dns .Values.certs.extraDNSNames | uniq }}
{{- $ips = concat $ips .Values.certs.extraIPs | uniq }}
{{- dict "dns" $dns "ips" $ips | toJson }}
{{- end }}

{{/* The webhook rules' matchConditions: requests of system:masters never reach octogate. */}}
{{- define "octogate.admissionMatchConditions" -}}
matchConditions:
  - name: exclude-system-masters
    expression: "!('system:masters' in request.userInfo.groups)"
{{- end }}

{{/* Does the pod need the config ConfigMap (default quota or GitHub CA)? */}}
{{- define "octogate.hasConfig" -}}
{{- if or .Values.github.caBundle (and .Values.ownership.enabled .Values.ownership.defaultQuota) }}true{{ end }}
{{- end }}

{{- define "octogate.policy" -}}
{{- if .Values.policy }}
{{- merge (deepCopy .Values.policy) (dict "apiVersion" "octogate.dev/v1alpha1" "kind" "AuthorizationPolicy") | toYaml }}
{{- end }}
{{- end }}

{{/* A kubeconfig for kube-apiserver to call octogate at .server with the client cert.
Arguments: dict "server" "ca" "cert" "key" (PEM strings). */}}
{{- define "octogate.webhookKubeconfig" -}}
apiVersion: v1
kind: Config
clusters:
  - name: octogate
    cluster:
      server: {{ .server }}
      certificate-authority-data: {{ .ca | b64enc }}
users:
  - name: kube-apiserver
    user:
      client-certificate-data: {{ .cert | b64enc }}
      client-key-data: {{ .key | b64enc }}
contexts:
  - name: octogate
    context:
      cluster: octogate
      user: kube-apiserver
current-context: octogate
{{- end }}

{{/* The kubeconfig a WebhookAdmissionConfiguration reads: its user is named after the
webhook's host:port, which is how kube-apiserver picks the client cert to present.
Arguments: dict "host" "cert" "key". */}}
{{- define "octogate.admissionKubeconfig" -}}
apiVersion: v1
kind: Config
users:
  - name: {{ .host | quote }}
    user:
      client-certificate-data: {{ .cert | b64enc }}
      client-key-data: {{ .key | b64enc }}
{{- end }}

{{/* AuthorizationConfiguration for kube-apiserver --authorization-config: Node, then octogate
(so that a Deny rule can override RBAC), then RBAC. system: users never reach octogate.
https://kubernetes.io/docs/reference/access-authn-authz/authorization/#using-configuration-file-for-authorization */}}
{{- define "octogate.authorizationConfig" -}}
apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
  - type: Node
    name: node
  - type: Webhook
    name: octogate
    webhook:
      timeout: {{ .Values.kubeAPIServer.authorization.timeout }}
      authorizedTTL: {{ .Values.kubeAPIServer.authorization.authorizedTTL }}
      unauthorizedTTL: {{ .Values.kubeAPIServer.authorization.unauthorizedTTL }}
      subjectAccessReviewVersion: v1
      matchConditionSubjectAccessReviewVersion: v1
      failurePolicy: NoOpinion
      connectionInfo:
        type: KubeConfigFile
        kubeConfigFile: {{ .Values.kubeAPIServer.configDir }}/authz.kubeconfig
      matchConditions:
        - expression: "!request.user.startsWith('system:')"
        - expression: "!has(request.groups) || !('system:masters' in request.groups)"
  - type: RBAC
    name: rbac
{{- end }}

{{/* AdmissionConfiguration for kube-apiserver --admission-control-config-file: the client
certificate kube-apiserver presents to the admission webhooks.
https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#authenticate-apiservers */}}
{{- define "octogate.admissionConfig" -}}
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: {{ .Values.kubeAPIServer.configDir }}/admission.kubeconfig
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: {{ .Values.kubeAPIServer.configDir }}/admission.kubeconfig
{{- end }}

{{/* Whose sessions /authenticate accepts (mode (a)), as JSON {"issuer", "audience", "ca": "inline",
"secret", "configMap" or ""}: session.trust.issuer, else session.issuer when this release issues
sessions; none without session.audience on an issuer (it then only mints). A verifier-only
release (session.enabled false) fetches the issuer's keys through its discovery, with the CA
bundle of session.trust (OCTOGATE_SESSION_TRUST_CA_FILE) over the system roots. */}}
{{- define "octogate.sessionTrust" -}}
{{- $s := .Values.session }}
{{- $t := $s.trust }}
{{- $from := $t.certificateAuthorityFrom }}
{{- $issuer := trimSuffix "/" ($t.issuer | default "") }}
{{- if and $s.enabled $issuer (ne $issuer (trimSuffix "/" $s.issuer)) }}
{{- fail (printf "session.trust.issuer %q: this release issues sessions (session.enabled) and verifies its own, of session.issuer %q; a cluster that verifies another issuer's sessions sets session.enabled=false" $t.issuer $s.issuer) }}
{{- end }}
{{- $sources := list }}
{{- if $t.certificateAuthority }}{{ $sources = append $sources "session.trust.certificateAuthority" }}{{ end }}
{{- if $from.secretName }}{{ $sources = append $sources "session.trust.certificateAuthorityFrom.secretName" }}{{ end }}
{{- if $from.configMapName }}{{ $sources = append $sources "session.trust.certificateAuthorityFrom.configMapName" }}{{ end }}
{{- if gt (len $sources) 1 }}
{{- fail (printf "%s: set one CA bundle source, not %d" (join ", " $sources) (len $sources)) }}
{{- end }}
{{- if and $sources (not $issuer) (not $s.enabled) }}
{{- fail (printf "%s is set without session.trust.issuer: the CA verifies the issuer this cluster trusts; set session.trust.issuer" (first $sources)) }}
{{- end }}
{{- if and (not $s.enabled) $issuer (not (trim ($s.audience | default ""))) }}
{{- fail (printf "session.audience is required with session.trust.issuer: this cluster's name, one of the clusters %s mints sessions for" $issuer) }}
{{- end }}
{{- if not $issuer }}
{{- $issuer = ternary (trimSuffix "/" $s.issuer) "" (and $s.enabled (ne ($s.audience | default "") "")) }}
{{- end }}
{{- $ca := "" }}
{{- if $t.certificateAuthority }}{{ $ca = "inline" }}{{ else if $from.secretName }}{{ $ca = "secret" }}{{ else if $from.configMapName }}{{ $ca = "configMap" }}{{ end }}
{{- if not (and $issuer $s.audience) }}
{{- $issuer = "" }}
{{- $ca = "" }}
{{- end }}
{{- dict "issuer" $issuer "audience" ($s.audience | default "") "ca" $ca | toJson }}
{{- end }}

{{/* The inputs of the AuthenticationConfiguration (session.authenticationConfig) with their
defaults, as JSON {"issuer", "audience", "discoveryURL", "ca": PEM or "", "servingCA": bool}:
exactly what `octogate kubeconfig authentication-config` is given as --issuer, --audience,
--discovery-url and --ca (the serving CA when servingCA). The rules are that command's
(session.NewAuthenticationConfiguration): a trailing / of the issuer is dropped, a discovery
URL equal to the issuer is refused, and /.well-known/openid-configuration is added to a
discovery URL that lacks it. */}}
{{- define "octogate.authenticationConfigInputs" -}}
{{- $s := .Values.session }}
{{- $a := $s.authenticationConfig }}
{{- $issuer := trimSuffix "/" (default (default $s.issuer $s.trust.issuer) $a.issuer) }}
{{- if not $issuer }}
{{- fail "session.authenticationConfig.issuer (or session.issuer) is required with session.authenticationConfig.enabled: the https URL of the session issuer, e.g. https://octogate.example.com" }}
{{- end }}
{{- $audience := default $s.audience $a.audience }}
{{- if not (trim $audience) }}
{{- fail "session.authenticationConfig.audience (or session.audience) is required with session.authenticationConfig.enabled: this cluster's name, one of the issuer's session.audiences" }}
{{- end }}
{{- if and $s.enabled (eq $issuer (trimSuffix "/" $s.issuer)) (not (has $audience $s.audiences)) }}
{{- fail (printf "session.authenticationConfig.audience %q is not in session.audiences %v: this issuer mints no session kube-apiserver would accept" $audience $s.audiences) }}
{{- end }}
{{- if and $a.publiclyTrusted $a.certificateAuthority }}
{{- fail "session.authenticationConfig: publiclyTrusted and certificateAuthority are exclusive (publiclyTrusted: kube-apiserver verifies the issuer with its host's roots)" }}
{{- end }}
{{- /* Only this release, when it issues the sessions, serves the issuer's discovery document
and keys at its own URL and with its serving CA. */}}
{{- $ours := and $s.enabled (eq $issuer (trimSuffix "/" $s.issuer)) }}
{{- $ownHosts := include "octogate.ownHosts" . | fromJsonArray }}
{{- $discovery := $a.discoveryURL }}
{{- if $discovery }}
{{- if eq (trimSuffix "/" $discovery) $issuer }}
{{- fail "session.authenticationConfig.discoveryURL: the same as the issuer; leave it empty (kube-apiserver refuses a discoveryURL equal to the issuer url)" }}
{{- end }}
{{- if and (not $ours) (has (urlParse $discovery).hostname $ownHosts) }}
{{- fail (printf "session.authenticationConfig.discoveryURL %q is this release's own URL, which serves no discovery document: this release does not issue the sessions of %s (session.enabled is false or session.issuer differs). Leave it empty (kube-apiserver fetches %s/.well-known/openid-configuration) or give a URL that serves that issuer's document" $discovery $issuer $issuer) }}
{{- end }}
{{- else if and $ours (not $a.publiclyTrusted) }}
{{- $inCluster := include "octogate.webhookURL" . }}
{{- if ne $inCluster $issuer }}
{{- $discovery = $inCluster }}
{{- end }}
{{- end }}
{{- if and $discovery (not (contains "/.well-known/openid-configuration" $discovery)) }}
{{- $discovery = printf "%s/.well-known/openid-configuration" (trimSuffix "/" $discovery) }}
{{- end }}
{{- $ca := $a.certificateAuthority | default "" }}
{{- if and (not $ours) (not $ca) (not $a.publiclyTrusted) }}
{{- if and $s.trust.certificateAuthority (eq $issuer (trimSuffix "/" ($s.trust.issuer | default ""))) }}
{{- $ca = $s.trust.certificateAuthority }}
{{- else }}
{{- fail (printf "session.authenticationConfig.certificateAuthority (the PEM CA bundle that verifies %s) or publiclyTrusted=true is required: this release does not issue those sessions, so its serving CA does not verify the issuer" $issuer) }}
{{- end }}
{{- end }}
{{- $servingCA := not (or $a.publiclyTrusted $ca) }}
{{- dict "issuer" $issuer "audience" $audience "discoveryURL" $discovery "ca" $ca "servingCA" $servingCA | toJson }}
{{- end }}

{{/* The issuer's host when the AuthenticationConfiguration trusts the serving CA for it: the
serving certificate must then name it. Empty otherwise. */}}
{{- define "octogate.authenticationConfigIssuerHost" -}}
{{- if .Values.session.authenticationConfig.enabled }}
{{- $in := include "octogate.authenticationConfigInputs" . | fromJson }}
{{- if $in.servingCA }}
{{- (urlParse $in.issuer).hostname }}
{{- end }}
{{- end }}
{{- end }}

{{/* AuthenticationConfiguration for kube-apiserver --authentication-config (Kubernetes 1.34+):
one jwt authenticator for the session issuer, the file `octogate kubeconfig
authentication-config` writes for the same inputs (test/chart checks that they agree). The
extra keys are session.ExtraKeys.
https://kubernetes.io/docs/reference/access-authn-authz/authentication/#using-authentication-configuration
Arguments: dict "root" (the chart context) "ca" (the serving CA's PEM, "" when not known). */}}
{{- define "octogate.authenticationConfig" -}}
{{- $in := include "octogate.authenticationConfigInputs" .root | fromJson }}
{{- $ca := ternary .ca $in.ca $in.servingCA }}
apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
  - issuer:
      url: {{ $in.issuer | toJson }}
      {{- with $in.discoveryURL }}
      discoveryURL: {{ . | toJson }}
      {{- end }}
      {{- with $ca }}
      certificateAuthority: |
        {{- trimSuffix "\n" . | nindent 8 }}
      {{- end }}
      audiences:
        - {{ $in.audience | toJson }}
    claimValidationRules:
      - expression: "has(claims.sub) && has(claims.uid) && claims.sub == claims.uid"
        message: "an octogate session's sub is its uid"
      - expression: "has(claims.username) && claims.username != \"\""
        message: "an octogate session names its username"
    claimMappings:
      username:
        claim: username
        prefix: ""
      groups:
        claim: groups
        prefix: ""
      uid:
        claim: uid
      extra:
        {{- range list "octogate.dev/github-login" "octogate.dev/actions-actor" "octogate.dev/actions-actor-id" "octogate.dev/actions-run-id" "octogate.dev/actions-workflow-ref" "octogate.dev/actions-ref" "octogate.dev/actions-sha" "octogate.dev/actions-event-name" }}
        - key: {{ . }}
          valueExpression: {{ printf "has(claims.extra) && %q in claims.extra ? claims.extra[%q] : []" . . | toJson }}
        {{- end }}
    userValidationRules:
      - expression: "!user.username.startsWith('system:')"
        message: "username cannot use the reserved system: prefix"
      - expression: "user.groups.all(group, !group.startsWith('system:'))"
        message: "groups cannot use the reserved system: prefix"
      - expression: "user.groups.all(group, !group.startsWith('octogate:'))"
        message: "groups cannot use the octogate: prefix only octogate's proxy asserts"
{{- end }}

{{/* Can the AuthenticationConfiguration be rendered without the serving CA (with cert-manager,
which issues that CA after the chart renders)? */}}
{{- define "octogate.authenticationConfigStandalone" -}}
{{- if .Values.session.authenticationConfig.enabled }}
{{- if not (include "octogate.authenticationConfigInputs" . | fromJson).servingCA }}true{{ end }}
{{- end }}
{{- end }}

{{/* The kube-apiserver flags an operator adds, one per line. */}}
{{- define "octogate.apiserverFlags" -}}
--authentication-token-webhook-config-file={{ .Values.kubeAPIServer.configDir }}/authn.kubeconfig
--authentication-token-webhook-version=v1
{{- if .Values.session.authenticationConfig.enabled }}
--authentication-config={{ .Values.kubeAPIServer.configDir }}/authentication-config.yaml
{{- end }}
--authorization-config={{ .Values.kubeAPIServer.configDir }}/authorization-config.yaml
{{- if .Values.clientAuth.enabled }}
--admission-control-config-file={{ .Values.kubeAPIServer.configDir }}/admission-config.yaml
{{- end }}
{{- end }}

{{/* GOMEMLIMIT in bytes: 90% of resources.limits.memory, so that the Go runtime collects
garbage harder as the container nears its limit instead of being OOM-killed; the rest is
room for memory the Go runtime does not count. Empty without a memory limit. Quantities
are Kubernetes' (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/):
a number with an optional Ki, Mi, Gi, Ti, k, M, G or T suffix. */}}
{{- define "octogate.goMemLimit" -}}
{{- $mem := "" }}
{{- with .Values.resources }}{{ with .limits }}{{ with .memory }}{{ $mem = toString . }}{{ end }}{{ end }}{{ end }}
{{- if $mem }}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $mem }}
{{- $unit := trimPrefix $num $mem }}
{{- $mult := dict "" 1.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 }}
{{- if or (not $num) (not (hasKey $mult $unit)) }}
{{- fail (printf "resources.limits.memory %q: want a quantity such as 256Mi or 1Gi (suffix Ki, Mi, Gi, Ti, k, M, G or T)" $mem) }}
{{- end }}
{{- printf "%.0f" (floor (mulf (float64 $num) (get $mult $unit) 0.9)) }}
{{- end }}
{{- end }}

{{/* A CA kept across upgrades: the Secret .name in .namespace (tls.crt, tls.key) when it
exists, else a new CA named .name valid .days days. JSON {"Cert", "Key": PEM, "reused": bool};
`helm template` cannot look up, so it always makes a new one. */}}
{{- define "octogate.lookupCA" -}}
{{- $secret := lookup "v1" "Secret" .namespace .name }}
{{- $data := dig "data" dict ($secret | default dict) }}
{{- if and (hasKey $data "tls.crt") (hasKey $data "tls.key") }}
{{- $ca := buildCustomCert (index $data "tls.crt") (index $data "tls.key") }}
{{- dict "Cert" $ca.Cert "Key" $ca.Key "reused" true | toJson }}
{{- else }}
{{- $ca := genCA .name (int .days) }}
{{- dict "Cert" $ca.Cert "Key" $ca.Key "reused" false | toJson }}
{{- end }}
{{- end }}

{{/* Labels of the certs-renew CronJob's objects and pods. Its name label differs from the
webhook pods' (octogate.selectorLabels), so the Service, PodDisruptionBudget and NetworkPolicy
never select a renewal pod. */}}
{{- define "octogate.renewSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-certs-renew" (include "octogate.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "octogate.renewLabels" -}}
helm.sh/chart: {{ include "octogate.chart" . }}
{{ include "octogate.renewSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: certs-renew
{{- end }}

{{/* Is the certs-renew CronJob rendered? Only for chart-generated certificates. */}}
{{- define "octogate.renewEnabled" -}}
{{- if and .Values.certs.renew.enabled (not .Values.certManager.enabled) }}true{{ end }}
{{- end }}

{{/* Labels of the session-keys-rotate CronJob's objects and pods; like octogate.renewLabels,
its name label keeps the webhook pods' selectors off them. */}}
{{- define "octogate.rotateLabels" -}}
helm.sh/chart: {{ include "octogate.chart" . }}
app.kubernetes.io/name: {{ printf "%s-session-keys-rotate" (include "octogate.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: session-keys-rotate
{{- end }}

{{/* Name of the proxy's Service and ServiceAccount. */}}
{{- define "octogate.proxyName" -}}
{{- printf "%s-proxy" (include "octogate.fullname" .) }}
{{- end }}

{{/* The Secret holding the proxy's serving certificate (tls.crt, tls.key). */}}
{{- define "octogate.proxyTLSSecret" -}}
{{- default (printf "%s-proxy-tls" (include "octogate.fullname" .)) .Values.proxy.tls.existingSecret }}
{{- end }}

{{/* Does the chart issue the proxy's serving certificate (proxy on, no existingSecret)? */}}
{{- define "octogate.proxyIssuesCert" -}}
{{- if and .Values.proxy.enabled (not .Values.proxy.tls.existingSecret) }}true{{ end }}
{{- end }}

{{/* The proxy serving certificate's names as {"cn": ..., "dns": [...], "ips": [...]} in JSON:
proxy.hosts (the first is the CN), then the proxy Service's in-cluster names. */}}
{{- define "octogate.proxySans" -}}
{{- include "octogate.proxyCheck" . }}
{{- $name := include "octogate.proxyName" . }}
{{- $ns := .Release.Namespace }}
{{- $dns := list }}
{{- $ips := list }}
{{- range .Values.proxy.hosts }}
{{- if regexMatch "^[0-9.]+$|:" . }}
{{- $ips = append $ips . }}
{{- else }}
{{- $dns = append $dns . }}
{{- end }}
{{- end }}
{{- $dns = concat $dns (list (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.%s" $name $ns .Values.clusterDomain)) | uniq }}
{{- dict "cn" (first .Values.proxy.hosts) "dns" $dns "ips" ($ips | uniq) | toJson }}
{{- end }}

{{/* The proxy's https URL as users reach it: the first of proxy.hosts and proxy.service.port
(left out when 443). */}}
{{- define "octogate.proxyURL" -}}
{{- $host := first .Values.proxy.hosts | default "PROXY-HOST" }}
{{- if contains ":" $host }}{{ $host = printf "[%s]" $host }}{{ end }}
{{- if eq (int .Values.proxy.service.port) 443 }}
{{- printf "https://%s" $host }}
{{- else }}
{{- printf "https://%s:%d" $host (int .Values.proxy.service.port) }}
{{- end }}
{{- end }}

{{/* Values the proxy cannot run without; rendered by the Deployment so that a bad combination
stops the install with a message naming the values. */}}
{{- define "octogate.proxyCheck" -}}
{{- if and (not .Values.clientAuth.enabled) (not .Values.proxy.enabled) (not .Values.clientAuth.reviewsWithoutClientCert) }}
{{- fail "clientAuth.enabled=false without proxy.enabled: octogate serves /authenticate and /authorize without a client certificate only when told to, since anyone who reaches the Service could then test tokens; set clientAuth.reviewsWithoutClientCert=true to serve them to kube-apiserver that way, or keep clientAuth.enabled=true" }}
{{- end }}
{{- if .Values.proxy.enabled }}
{{- if and (not .Values.proxy.hosts) (not .Values.proxy.tls.existingSecret) }}
{{- fail "proxy.hosts is required with proxy.enabled: the names (or IPs) kubectl reaches the proxy at, e.g. --set 'proxy.hosts={kube.example.com}'; point that name at the load balancer's address after the install (or set proxy.tls.existingSecret)" }}
{{- end }}
{{- if .Values.clientAuth.enabled }}
{{- fail "proxy.enabled needs clientAuth.enabled=false: a managed kube-apiserver cannot present a client certificate to the admission webhooks (no --admission-control-config-file), so they would be refused" }}
{{- end }}
{{- if and .Values.proxy.rbac (not .Values.ownership.enabled) }}
{{- fail "proxy.rbac needs ownership.enabled: the controller keeps the proxy's ClusterRoles and ClusterRoleBindings; set proxy.rbac=false and create them yourself, or turn ownership.enabled on" }}
{{- end }}
{{- end }}
{{- end }}
