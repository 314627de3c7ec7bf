/* The libibverbs provider interface softrnic's provider binds to. */
#include <config.h>
#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>
