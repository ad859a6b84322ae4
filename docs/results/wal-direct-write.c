// A group commit's WAL write (12 KiB, the size of a group of four creates' frames) made durable
// four ways on this machine's disk, interleaved, 400 rounds each, into a preallocated 64 MiB
// file: buffered pwrite + fdatasync (what the metadata server does), O_DIRECT pwrite +
// fdatasync, O_DIRECT|O_DSYNC pwrite, buffered O_DSYNC pwrite. Prints p50/p10/p90 in us.
// The virtual disk has no FUA (/sys/block/vda/queue/fua is 0), so every way ends in a cache flush
// (docs/benchmarks.md, "Wake-ups on this machine").
//
//   gcc -O2 -o wal-direct wal-direct-write.c && ./wal-direct   (writes /work/s9probe.bin, then removes it)
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  size_t n=12288; int rounds=400; size_t fsz=64<<20;
  char*buf; posix_memalign((void**)&buf,4096,n); memset(buf,7,n);
  const char*path="/work/s9probe.bin";
  int f=open(path,O_RDWR|O_CREAT|O_TRUNC,0644); char*z=calloc(1,1<<20);
  for(size_t o=0;o<fsz;o+=1<<20) pwrite(f,z,1<<20,o); fsync(f); close(f);
  int fb=open(path,O_RDWR), fd=open(path,O_RDWR|O_DIRECT), fds=open(path,O_RDWR|O_DIRECT|O_DSYNC), fbs=open(path,O_RDWR|O_DSYNC);
  double t[4][400]; size_t off=0;
  for(int r=0;r<rounds;r++) for(int m=0;m<4;m++){
    off=(off+n)%(fsz-n); off&=~4095UL;
    double a=now();
    if(m==0){pwrite(fb,buf,n,off);fdatasync(fb);}
    if(m==1){pwrite(fd,buf,n,off);fdatasync(fd);}
    if(m==2){pwrite(fds,buf,n,off);}
    if(m==3){pwrite(fbs,buf,n,off);}
    t[m][r]=now()-a;
  }
  const char*nm[]={"buffered+fdatasync","direct+fdatasync","direct|dsync","buffered|dsync"};
  for(int m=0;m<4;m++){qsort(t[m],rounds,sizeof(double),cmp);printf("%-20s p50 %.1f p10 %.1f p90 %.1f\n",nm[m],t[m][rounds/2],t[m][rounds/10],t[m][rounds*9/10]);}
  unlink(path);
}
