/* cmd_rm.c: `minfer rm REF`: remove a cached model, and the blobs nothing else in its cache uses. */
#include "cli.h"

int cmd_rm(int argc, char **argv) {
    if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc == 2 ? stdout : stderr,
                "usage: minfer rm REF\n"
                "Removes a cached model (a name from `minfer list`, hf:ORG/REPO[:SEL] or ollama:NAME[:TAG]): its\n"
                "snapshot entries or manifest, and the blobs no other cached model uses. Never a plain file.\n");
        return argc == 2 ? 0 : 2;
    }
    mf_hub *h = cli_hub_open(0, true);
    if (!h) return 1;
    mf_hub_model m;
    uint64_t freed = 0;
    mf_status s = mf_hub_remove(h, argv[1], &m, &freed);
    mf_hub_free(h);
    if (s != MF_OK) {
        cli_error_status(s, argv[1]);
        return 1;
    }
    fprintf(stderr, "minfer: removed %s (%s), %.1f MB freed\n", m.name, m.ref, (double)freed / 1e6);
    mf_hub_model_clear(&m);
    return 0;
}
