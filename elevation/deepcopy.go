package elevation

import (
	"slices"
)

// DeepCopy returns a copy of s that shares nothing with it.
func (s *Status) DeepCopy() *Status {
	out := *s
	out.Requester.Groups = slices.Clone(s.Requester.Groups)
	out.RequestedAt = s.RequestedAt.DeepCopy()
	out.StartTime = s.StartTime.DeepCopy()
	out.EndTime = s.EndTime.DeepCopy()
	if s.Approvals != nil {
		out.Approvals = make([]Step, len(s.Approvals))
		copy(out.Approvals, s.Approvals)
	}
	if s.Denial != nil {
		d := *s.Denial
		out.Denial = &d
	}
	if s.Revocation != nil {
		r := *s.Revocation
		out.Revocation = &r
	}
	return &out
}
