// One-byte request/answer round trips over loopback TCP between two threads of one process
// (TCP_NODELAY both ways), median and spread over N rounds. Run it plain (the scheduler puts
// the threads where it likes, usually on different CPUs) and under `taskset -c 0` (both on one
// CPU): the difference is what waking a thread on the other CPU costs on this machine
// (docs/benchmarks.md, "Wake-ups on this machine").
//
//   gcc -O2 -pthread -o rtt loopback-rtt.c && ./rtt 20000 && taskset -c 0 ./rtt 20000
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <time.h>
static int port;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static void* srv(void*a){int l=*(int*)a;int c=accept(l,0,0);int one=1;setsockopt(c,IPPROTO_TCP,TCP_NODELAY,&one,4);char b[64];while(read(c,b,64)>0)write(c,b,1);return 0;}
int main(int argc,char**argv){int n=argc>1?atoi(argv[1]):20000;
 int l=socket(AF_INET,SOCK_STREAM,0);struct sockaddr_in a={0};a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);
 bind(l,(void*)&a,sizeof a);listen(l,1);socklen_t sl=sizeof a;getsockname(l,(void*)&a,&sl);
 pthread_t t;pthread_create(&t,0,srv,&l);
 int c=socket(AF_INET,SOCK_STREAM,0);connect(c,(void*)&a,sizeof a);int one=1;setsockopt(c,IPPROTO_TCP,TCP_NODELAY,&one,4);
 char b[64]={1};double*v=malloc(n*sizeof(double));
 for(int i=0;i<n;i++){double s=now();write(c,b,1);read(c,b,64);v[i]=now()-s;}
 int cmp(const void*x,const void*y){double p=*(double*)x,q=*(double*)y;return p<q?-1:p>q;}
 qsort(v,n,sizeof(double),cmp);printf("rtt p10 %.1f p50 %.1f p90 %.1f us\n",v[n/10],v[n/2],v[9*n/10]);}
