#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/uio.h>
#include <time.h>
#include <string.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){
  int frames=atoi(argv[1]); int mode=atoi(argv[2]); int rounds=20000;
  int fd=open("/work/walx.tmp",O_RDWR|O_CREAT,0644);
  char *z=calloc(1,8<<20); pwrite(fd,z,8<<20,0); fdatasync(fd);
  char hdr[24], page[1024]; memset(hdr,1,24); memset(page,2,1024);
  off_t off=32; double t0=now();
  struct iovec iov[2*64];
  for(int r=0;r<rounds;r++){
    if(off+frames*1048>(8<<20)-4096) off=32;
    if(mode==0){ for(int f=0;f<frames;f++){ pwrite(fd,hdr,24,off); off+=24; pwrite(fd,page,1024,off); off+=1024; } }
    else { for(int f=0;f<frames;f++){ iov[2*f].iov_base=hdr; iov[2*f].iov_len=24; iov[2*f+1].iov_base=page; iov[2*f+1].iov_len=1024;} pwritev(fd,iov,2*frames,off); off+=frames*1048; }
    if (SYNCN && r%SYNCN==0) fdatasync(fd);
  }
  double t=now()-t0; printf("frames %d mode %s: %.2f us per group\n",frames,mode?"pwritev":"pwrite x2",t/rounds);
  unlink("/work/walx.tmp"); return 0;}
