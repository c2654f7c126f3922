// Package fielderr is the error vocabulary of octogate's strict YAML documents (the
// AuthorizationPolicy, the NamespaceTemplates): one problem at a field path, and every
// problem of a document in one message.
package fielderr

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

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

// CheckShape walks a decoded JSON value (maps, lists, strings, float64 numbers) against the Go
// type it must fill and returns its unknown fields and type mismatches by path, in a stable
// order (object keys sorted). Field names are the json tags and match exactly, as in
// Kubernetes objects; path is the value's own path ("" for the document).
func CheckShape(path string, v any, t reflect.Type) []FieldError {
	var problems []FieldError
	checkShape(path, v, t, &problems)
	return problems
}

func checkShape(path string, v any, t reflect.Type, problems *[]FieldError) {
	if v == nil {
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := path
	if at == "" {
		at = "(document)"
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			*problems = append(*problems, FieldError{Field: at, Detail: "must be an object"})
			return
		}
		fields := jsonFields(t)
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			f, ok := fields[key]
			if !ok {
				*problems = append(*problems, FieldError{Field: Path(path, key), Detail: "unknown field"})
				continue
			}
			checkShape(Path(path, key), obj[key], f.Type, problems)
		}
	case reflect.Map:
		if _, ok := v.(map[string]any); !ok {
			*problems = append(*problems, FieldError{Field: at, Detail: "must be an object"})
		}
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			*problems = append(*problems, FieldError{Field: at, Detail: "must be a list"})
			return
		}
		for i, item := range list {
			checkShape(path+"["+strconv.Itoa(i)+"]", item, t.Elem(), problems)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			*problems = append(*problems, FieldError{Field: at, Detail: "must be a string"})
		}
	case reflect.Int:
		f, ok := v.(float64)
		if !ok || f != float64(int64(f)) || f < 0 || f > 1<<31 {
			*problems = append(*problems, FieldError{Field: at, Detail: "must be a whole number of 0 or more"})
		}
	}
}

// Path is the field path of key under path ("rules[0]" + "verbs" = "rules[0].verbs"); an
// empty key is path itself.
func Path(path, key string) string {
	if key == "" {
		return path
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	fields := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f
	}
	return fields
}
