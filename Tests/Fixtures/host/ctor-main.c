int ctor_linked(void);
int main(void) { return ctor_linked() - 1; }
