// Package docs checks the documentation as code: every relative link and anchor in README.md,
// docs/ and the chart's README resolves, and the chart's README is the one generated from
// values.yaml and values.schema.json.
package docs
