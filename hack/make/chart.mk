##@ Chart

# Release namespace for lint: not `default`, so the webhooks' exclusion of the
# operator's own namespace is rendered as most installs get it.
CHART_LINT_NAMESPACE ?= memcached-operator-system

.PHONY: helm-lint
helm-lint: helm helm4 ## Run helm lint --strict with Helm 3 and Helm 4 on the chart with each ci/*-values.yaml set; Helm 4 also renders each, for an upgrade.
	@set -e; for f in $(CHART)/ci/*-values.yaml; do \
		echo "helm lint --strict -f $$f (Helm 3, Helm 4)"; \
		$(HELM) lint --strict --namespace $(CHART_LINT_NAMESPACE) -f $$f $(CHART); \
		$(HELM4) lint --strict --namespace $(CHART_LINT_NAMESPACE) -f $$f $(CHART); \
		$(HELM4) template memcached-operator $(CHART) --is-upgrade --namespace $(CHART_LINT_NAMESPACE) -f $$f >/dev/null; \
	done

.PHONY: helm-template
helm-template: helm ## Render the chart with each ci/*-values.yaml set, as `helm template` would.
	@set -e; for f in $(CHART)/ci/*-values.yaml; do \
		echo "helm template -f $$f"; \
		$(HELM) template memcached-operator $(CHART) --namespace $(CHART_LINT_NAMESPACE) -f $$f >/dev/null; \
	done

.PHONY: helm-docs
helm-docs: ## Generate the chart README from values.yaml comments.
	$(eval HELM_DOCS := $(shell $(TOOL) helm-docs))
	$(HELM_DOCS) --chart-search-root $(CHART) --template-files README.md.gotmpl --sort-values-order file

.PHONY: verify-chart
verify-chart: helm-docs helm-lint ## Fail when the chart README is stale or the chart does not lint.
	@git diff --exit-code -- $(CHART)/README.md || { echo 'chart README is stale: run make helm-docs and commit'; exit 1; }
	@[ -z "$$(git ls-files --others --exclude-standard -- $(CHART)/README.md)" ] || { echo '$(CHART)/README.md is not committed'; exit 1; }
