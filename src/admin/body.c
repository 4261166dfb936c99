/*
 * JSON request bodies: one object, its members listed with their types; anything else is a
 * 400 {"error": "bad_request", "message", "field"} so handlers only see well-typed values.
 */
#include <string.h>

#include "admin/impl.h"

static const char *type_name(int type)
{
	switch (type) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case NX_ADMIN_JSON_BOOL:
	case JSON_TRUE:
	case JSON_FALSE:
		return "true or false";
	case JSON_NULL:
		return "null";
	default:
		return "a value";
	}
}

static bool type_ok(const json_t *v, int type)
{
	switch (type) {
	case NX_ADMIN_JSON_ANY:
		return true;
	case NX_ADMIN_JSON_BOOL:
		return json_is_boolean(v);
	case JSON_REAL:
		return json_is_number(v);
	default:
		return (int)json_typeof(v) == type;
	}
}

json_t *nx_admin_req_json(struct nx_admin_req *req, const struct nx_admin_field *fields,
			  json_t **vals)
{
	size_t n = 0;
	while (fields[n].name) {
		vals[n++] = NULL;
	}
	if (!req->body || req->body_len == 0) {
		nx_admin_reply_error(req, 400, "bad_request", NULL,
				     "a JSON object body is required");
		return NULL;
	}
	json_error_t e;
	json_t *o = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &e);
	if (!o) {
		nx_admin_reply_error(req, 400, "bad_request", NULL,
				     "invalid JSON at line %d column %d: %s", e.line, e.column,
				     e.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		nx_admin_reply_error(req, 400, "bad_request", NULL,
				     "the body must be a JSON object");
		return NULL;
	}
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		size_t i = 0;
		while (i < n && strcmp(fields[i].name, key)) {
			i++;
		}
		if (i == n) {
			nx_admin_reply_error(req, 400, "bad_request", key, "unknown member '%s'",
					     key);
			json_decref(o);
			return NULL;
		}
		if (!type_ok(v, fields[i].type)) {
			nx_admin_reply_error(req, 400, "bad_request", key, "'%s' must be %s", key,
					     type_name(fields[i].type));
			json_decref(o);
			return NULL;
		}
		vals[i] = v;
	}
	for (size_t i = 0; i < n; i++) {
		if (fields[i].required && !vals[i]) {
			nx_admin_reply_error(req, 400, "bad_request", fields[i].name,
					     "'%s' is required", fields[i].name);
			json_decref(o);
			return NULL;
		}
	}
	return o;
}
