/* dlopen.c opens a plugin with immediate binding (RTLD_NOW), after the
 * libraries named before it (RTLD_GLOBAL), and says whether it loaded. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int i;
    for (i = 1; i < argc - 1; i++) {
        if (NULL == dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL)) {
            printf("FAIL %s\n", dlerror());
            return 1;
        }
    }
    if (argc < 2 || NULL == dlopen(argv[argc - 1], RTLD_NOW)) {
        printf("FAIL %s\n", argc < 2 ? "usage: dlopen [lib...] plugin" : dlerror());
        return 1;
    }
    printf("loaded\n");
    return 0;
}
