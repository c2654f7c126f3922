package githubapi

import (
	"net/http"
	"strconv"
	"strings"
)

// getUserByID: https://docs.github.com/rest/users/users#get-a-user-using-their-id
// (GET /user/{account_id}); 404 for an unknown id.
func (s *Server) getUserByID(w http.ResponseWriter, r *http.Request, c restCall) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err == nil {
		for _, u := range s.users {
			if u.id == id {
				writeJSON(w, http.StatusOK, userJSON(c, u, true))
				return
			}
		}
	}
	writeError(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/users/users#get-a-user-using-their-id")
}

// checkMember: https://docs.github.com/rest/orgs/members#check-organization-membership-for-a-user
// 204 for an active member, 404 otherwise, when the requester is a member of the org; 302 to
// the public-membership URL when the requester is not.
func (s *Server) checkMember(w http.ResponseWriter, r *http.Request, c restCall) {
	org := strings.ToLower(r.PathValue("org"))
	if m, ok := c.user.memberships[org]; !ok || (m.State != "" && m.State != "active") {
		w.Header().Set("Location", c.api+"/orgs/"+r.PathValue("org")+"/public_members/"+r.PathValue("username"))
		w.WriteHeader(http.StatusFound)
		return
	}
	if u := s.users[strings.ToLower(r.PathValue("username"))]; u != nil {
		if m, ok := u.memberships[org]; ok && (m.State == "" || m.State == "active") {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/orgs/members#check-organization-membership-for-a-user")
}

// removeMember: https://docs.github.com/rest/orgs/members#remove-an-organization-member
// (DELETE /orgs/{org}/members/{username}); the requester must be an org owner (admin): 403
// otherwise. 204 whether or not the user was a member.
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request, c restCall) {
	org := strings.ToLower(r.PathValue("org"))
	if m, ok := c.user.memberships[org]; !ok || m.Role != "admin" {
		writeError(w, http.StatusForbidden, "You must be an admin to remove a member", "https://docs.github.com/rest/orgs/members#remove-an-organization-member")
		return
	}
	if u := s.users[strings.ToLower(r.PathValue("username"))]; u != nil {
		delete(u.memberships, org)
	}
	w.WriteHeader(http.StatusNoContent)
}
