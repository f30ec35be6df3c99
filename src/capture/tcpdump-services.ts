/**
 * @module capture/tcpdump-services — service names back to port numbers, for tcpdump text printed
 * without `-n` (`db.corp.postgresql`, `dns.google.domain`). tcpdump prints the first name
 * `/etc/services` gives a port; this is that table as Debian and Ubuntu ship it (netbase 6.4,
 * tcp and udp entries, IANA names), where each name stands for one port. A machine with a longer
 * table (RHEL, macOS list every IANA name) may print names this one lacks: they stay names.
 */

// "name port" pairs, in the file's order.
const TABLE =
  "tcpmux 1 echo 7 discard 9 systat 11 daytime 13 netstat 15 qotd 17 chargen 19 ftp-data 20 " +
  "ftp 21 fsp 21 ssh 22 telnet 23 smtp 25 time 37 whois 43 tacacs 49 domain 53 bootps 67 " +
  "bootpc 68 tftp 69 gopher 70 finger 79 http 80 kerberos 88 iso-tsap 102 acr-nema 104 " +
  "pop3 110 sunrpc 111 auth 113 nntp 119 ntp 123 epmap 135 netbios-ns 137 netbios-dgm 138 " +
  "netbios-ssn 139 imap2 143 snmp 161 snmp-trap 162 cmip-man 163 cmip-agent 164 mailq 174 " +
  "xdmcp 177 bgp 179 smux 199 qmtp 209 z3950 210 ipx 213 ptp-event 319 ptp-general 320 " +
  "pawserv 345 zserv 346 rpc2portmap 369 codaauth2 370 clearcase 371 ldap 389 svrloc 427 " +
  "https 443 snpp 444 microsoft-ds 445 kpasswd 464 submissions 465 saft 487 isakmp 500 " +
  "rtsp 554 nqs 607 asf-rmcp 623 qmqp 628 ipp 631 ldp 646 exec 512 biff 512 login 513 " +
  "who 513 shell 514 syslog 514 printer 515 talk 517 ntalk 518 route 520 gdomap 538 " +
  "uucp 540 klogin 543 kshell 544 dhcpv6-client 546 dhcpv6-server 547 afpovertcp 548 " +
  "nntps 563 submission 587 ldaps 636 tinc 655 silc 706 kerberos-adm 749 domain-s 853 " +
  "rsync 873 ftps-data 989 ftps 990 telnets 992 imaps 993 pop3s 995 socks 1080 proofd 1093 " +
  "rootd 1094 openvpn 1194 rmiregistry 1099 lotusnote 1352 ms-sql-s 1433 ms-sql-m 1434 " +
  "ingreslock 1524 datametrics 1645 sa-msg-port 1646 kermit 1649 groupwise 1677 l2f 1701 " +
  "radius 1812 radius-acct 1813 cisco-sccp 2000 nfs 2049 gnunet 2086 rtcm-sc104 2101 " +
  "gsigatekeeper 2119 gris 2135 cvspserver 2401 venus 2430 venus-se 2431 codasrv 2432 " +
  "codasrv-se 2433 mon 2583 dict 2628 f5-globalsite 2792 gsiftp 2811 gpsd 2947 gds-db 3050 " +
  "icpv2 3130 isns 3205 iscsi-target 3260 mysql 3306 ms-wbt-server 3389 nut 3493 " +
  "distcc 3632 daap 3689 svn 3690 suucp 4031 sysrqd 4094 sieve 4190 epmd 4369 remctl 4373 " +
  "f5-iquery 4353 ntske 4460 ipsec-nat-t 4500 iax 4569 mtn 4691 radmin-port 4899 sip 5060 " +
  "sip-tls 5061 xmpp-client 5222 xmpp-server 5269 cfengine 5308 mdns 5353 postgresql 5432 " +
  "freeciv 5556 amqps 5671 amqp 5672 x11 6000 x11-1 6001 x11-2 6002 x11-3 6003 x11-4 6004 " +
  "x11-5 6005 x11-6 6006 x11-7 6007 gnutella-svc 6346 gnutella-rtr 6347 redis 6379 " +
  "sge-qmaster 6444 sge-execd 6445 mysql-proxy 6446 babel 6696 ircs-u 6697 bbs 7000 " +
  "afs3-fileserver 7000 afs3-callback 7001 afs3-prserver 7002 afs3-vlserver 7003 " +
  "afs3-kaserver 7004 afs3-volser 7005 afs3-bos 7007 afs3-update 7008 afs3-rmtsys 7009 " +
  "font-service 7100 http-alt 8080 puppet 8140 bacula-dir 9101 bacula-fd 9102 " +
  "bacula-sd 9103 xmms2 9667 nbd 10809 zabbix-agent 10050 zabbix-trapper 10051 amanda 10080 " +
  "dicom 11112 hkp 11371 db-lsp 17500 dcap 22125 gsidcap 22128 wnn6 22273 kerberos4 750 " +
  "kerberos-master 751 passwd-server 752 krb-prop 754 zephyr-srv 2102 zephyr-clt 2103 " +
  "zephyr-hm 2104 iprop 2121 supfilesrv 871 supfiledbg 1127 poppassd 106 moira-db 775 " +
  "moira-update 777 moira-ureg 779 spamd 783 skkserv 1178 predict 1210 rmtcfg 1236 " +
  "xtel 1313 xtelw 1314 zebrasrv 2600 zebra 2601 ripd 2602 ripngd 2603 ospfd 2604 bgpd 2605 " +
  "ospf6d 2606 ospfapi 2607 isisd 2608 fax 4557 hylafax 4559 munin 4949 rplay 5555 " +
  "nrpe 5666 nsca 5667 canna 5680 syslog-tls 6514 sane-port 6566 ircd 6667 zope-ftp 8021 " +
  "tproxy 8081 omniorb 8088 clc-build-daemon 8990 xinetd 9098 git 9418 zope 9673 " +
  "webmin 10000 kamanda 10081 amandaidx 10082 amidxtape 10083 sgi-cmsd 17001 sgi-crsd 17002 " +
  "sgi-gcd 17003 sgi-cad 17004 binkp 24554 asp 27374 csync2 30865 dircproxy 57000 " +
  "tfido 60177 fido 60179 ";

let byName: Map<string, number> | undefined;

/** The port a service name stands for, or undefined when the table does not know the name. */
export function servicePort(name: string): number | undefined {
  if (byName === undefined) {
    byName = new Map();
    const f = TABLE.trim().split(" ");
    for (let i = 0; i + 1 < f.length; i += 2) byName.set(f[i]!, Number(f[i + 1]));
  }
  return byName.get(name);
}
