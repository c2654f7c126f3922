package subjectaccessreview

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteSummary writes a human-readable table of the policy's rules, in evaluation order:
// number, name, effect, subjects, namespaces and how many resource and non-resource rules,
// after a line counting the rules and the elevations, and one naming the elevations.
func (p *Policy) WriteSummary(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "policy is valid: %d rules, evaluated in order, the first match decides; %d elevations\n", len(p.doc.Rules), len(p.elevations)); err != nil {
		return err
	}
	if names := p.ElevationNames(); len(names) > 0 {
		if _, err := fmt.Fprintf(w, "elevations: %s\n", strings.Join(names, ", ")); err != nil {
			return err
		}
	}
	if len(p.doc.Rules) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "#\tNAME\tEFFECT\tSUBJECTS\tNAMESPACES\tRESOURCE RULES\tNON-RESOURCE RULES")
	for i, r := range p.doc.Rules {
		subjects := make([]string, len(r.Subjects))
		for j, s := range r.Subjects {
			subjects[j] = s.Kind + ":" + s.Name
			if s.Namespace != "" {
				subjects[j] = s.Kind + ":" + s.Namespace + "/" + s.Name
			}
		}
		namespaces := "any"
		if len(r.Namespaces) > 0 {
			namespaces = strings.Join(r.Namespaces, ",")
		}
		_, _ = fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\n", i+1, r.Name, r.Effect, strings.Join(subjects, ","), namespaces, len(r.ResourceRules), len(r.NonResourceRules))
	}
	return tw.Flush()
}
