// Package docs checks the documentation as code: every relative link and anchor in README.md,
// docs/ and the chart's README resolves, the chart's README is the one generated from
// values.yaml and values.schema.json, docs/configuration.md has a row for every OCTOGATE_*
// variable a command reads, and every line of README.md's tour is one the demo prints
// (internal/tour).
package docs
