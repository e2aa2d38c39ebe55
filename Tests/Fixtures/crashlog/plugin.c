/* A plugin that crashes when called (dlopened by host.c). */
__attribute__((noinline)) static int read_setting(const int *settings)
{
    return settings[3];
}

void plugin_entry(void)
{
    volatile int sink = read_setting((const int *)0);
    (void)sink;
}
