package door

import (
	"fmt"
	"mime"
)

// MediaTypeJSON is the media type every webhook route takes unless webhooks.WithMediaTypes
// says otherwise: what kube-apiserver's webhook clients send.
const MediaTypeJSON = "application/json"

// jsonOnly is the media types of a route that takes application/json only.
var jsonOnly = []string{MediaTypeJSON}

// ContentTypeError is the Content-Type rule of a webhook route that takes application/json
// only (the default; webhooks.WithMediaTypes sets others): parameters such as charset are
// allowed, which is what kube-apiserver's webhook clients send for TokenReview,
// SubjectAccessReview and AdmissionReview (client-go's REST client defaults ContentType to
// application/json). It returns "" for an acceptable value, else the error a route answers
// with 415 Unsupported Media Type: "Content-Type must be application/json" (none given) or
// `Content-Type must be application/json, not "text/plain"`.
func ContentTypeError(contentType string) string {
	if MatchMediaType(contentType, jsonOnly) != "" {
		return ""
	}
	return WrongMediaType("Content-Type must be "+MediaTypeJSON, contentType)
}

// MatchMediaType is the one of accepted (bare, lower-case media types) that contentType
// names, with or without parameters and in any case (RFC 9110 section 8.3.1), or "" when
// it names none or does not parse. An exact match is found without allocating.
func MatchMediaType(contentType string, accepted []string) string {
	for _, a := range accepted {
		if contentType == a {
			return a
		}
	}
	if contentType == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	for _, a := range accepted {
		if mt == a {
			return a
		}
	}
	return ""
}

// WrongMediaType is the 415 message: want ("Content-Type must be ..."), and the value sent,
// clipped, unless none was.
func WrongMediaType(want, contentType string) string {
	if contentType == "" {
		return want
	}
	return fmt.Sprintf("%s, not %q", want, Clip(contentType))
}
