/*
 * fuzz_containerd — one unframed protobuf message from containerd, as
 * reapd decodes it (agent/containerd.h): byte 0 picks the decoder (0: an
 * Events envelope, 1: a Tasks.List answer, 2: a Tasks.Get answer; the
 * rest repeat), the remaining bytes are the message. fuzz_grpc reaches the
 * same decoders through the framing; this target spends every execution
 * on the protobuf itself.
 *
 * Checked: an envelope decodes to 0 (one of the three events, with a
 * valid container id), 1 (another topic) or -1 (nothing handed out, the
 * event left zeroed); a list or a task either decodes whole with every
 * id valid or fails with nothing handed out. Decoding the same bytes
 * twice gives the same result.
 */
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in in = {data, size};

    fuzz_quiet_logs();
    switch (fuzz_byte(&in) % 3) {
    case 0:
        fuzz_ctrd_envelope(in.p, in.n);
        break;
    case 1:
        fuzz_ctrd_list(in.p, in.n);
        break;
    default:
        fuzz_ctrd_get(in.p, in.n);
        break;
    }
    return 0;
}
