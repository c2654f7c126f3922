package ownership

import (
	"errors"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// LoadQuotaFile reads a ResourceQuota spec (the `spec` of a v1 ResourceQuota, e.g.
// `hard: {requests.cpu: "4", pods: "20"}`) from the YAML or JSON file at path
// (OCTOGATE_DEFAULT_QUOTA_FILE). Unknown or duplicate fields, quantities that do not parse,
// negative quantities and an empty `hard` are errors naming the file and the field
// (https://kubernetes.io/docs/concepts/policy/resource-quotas/).
func LoadQuotaFile(path string) (*corev1.ResourceQuotaSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("default quota file: %w", err)
	}
	spec := &corev1.ResourceQuotaSpec{}
	if err := yaml.UnmarshalStrict(data, spec); err != nil {
		return nil, fmt.Errorf("default quota file %s: not a ResourceQuota spec: %w", path, err)
	}
	if err := validateQuota(spec); err != nil {
		return nil, fmt.Errorf("default quota file %s: %w", path, err)
	}
	return spec, nil
}

func validateQuota(spec *corev1.ResourceQuotaSpec) error {
	if len(spec.Hard) == 0 {
		return errors.New("hard: at least one resource limit is required")
	}
	for name, q := range spec.Hard {
		if q.Sign() < 0 {
			return fmt.Errorf("hard.%s: %s is negative", name, q.String())
		}
	}
	return nil
}
