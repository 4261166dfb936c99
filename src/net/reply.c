#include "net/reply.h"

const char *nx_proto_name(enum nx_proto p)
{
	static const char *const names[] = {
#define NX_PROTO_NAME(id, text) text,
		NX_PROTOS(NX_PROTO_NAME)
#undef NX_PROTO_NAME
	};
	return (unsigned)p < NX_PROTO__COUNT ? names[p] : "?";
}
