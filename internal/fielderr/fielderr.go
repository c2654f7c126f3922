// Package fielderr is the error vocabulary of octogate's strict YAML documents (the
// AuthorizationPolicy, the NamespaceTemplates): one problem at a field path, and every
// problem of a document in one message.
package fielderr

import "strings"

// FieldError is one problem in a document, at a field path such as
// "rules[2].resourceRules[0].verbs"; Field is empty for a problem of the whole document.
type FieldError struct {
	Field  string
	Detail string
}

func (e FieldError) Error() string {
	if e.Field == "" {
		return e.Detail
	}
	return e.Field + ": " + e.Detail
}

// Join is the message of a document's problems: title ("invalid policy"), a colon, and the
// problems in document order separated by "; ".
func Join(title string, problems []FieldError) string {
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.Error()
	}
	return title + ": " + strings.Join(msgs, "; ")
}
