/*
 * Loopback ports for unit tests. Header-only, like testdir.h. Needs cmocka.h first.
 */
#ifndef HC_TESTS_UNIT_PORTS_H
#define HC_TESTS_UNIT_PORTS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* A loopback TCP port with nothing listening on it (free a moment ago: a connection to it is
 * refused). */
static inline int hc_test_closed_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

#endif
